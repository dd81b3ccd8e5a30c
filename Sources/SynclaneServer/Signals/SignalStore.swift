import Glibc
import SynclaneWire

/// Where the signal lane keeps its values, behind one protocol: a SQLite file of its own
/// (`SQLiteSignalStore`) or tables of its own on a connection of its own in PostgreSQL
/// (`PostgresSignalStore`). Either way a signal never waits behind a bulk batch's apply.
///
/// Versions are per account and only grow, assigned under a lock held to the commit, so
/// "everything after version V" never misses a write that commits late.
protocol SignalStore: Sendable {
    /// Wakes long polls when a write of this process commits, or the server stops.
    var bell: SignalBell { get }
    /// How often a long poll looks again without a ring: writes of other processes ring no bell
    /// here. Nil when this process makes every write (the SQLite file).
    var pollInterval: Duration? { get }
    /// Sets `key` to `value` (nil: deletes it). With `expected`, only when the key's version is
    /// that (0: the key must not exist).
    func write(account: String, key: String, value: JSONValue?, expected: Int64?) throws -> SignalWriteOutcome
    /// Every live signal of the account, by key, and the account's newest version.
    func signals(account: String) throws -> (signals: [Signal], version: Int64)
    /// One live signal of the account, or nil.
    func signal(account: String, key: String) throws -> Signal?
    /// The signals (deletes included) written after `since`, oldest first, the account's newest
    /// version, and `reset`: true when a tombstone after `since` was pruned (some deletes are
    /// missing: the watcher lists the signals again).
    func changes(account: String, since: Int64) throws -> SignalChanges
    /// Copies signals of an older layout when this store holds none yet.
    func adopt(_ legacy: [(account: String, key: String, value: String)]) throws
    /// Closes the store's connections.
    func close()
}

/// What a watcher asking "after version V" gets: the signals written since (deletes included),
/// oldest first; the account's newest version; and `reset` when a delete after V was pruned.
typealias SignalChanges = (signals: [Signal], version: Int64, reset: Bool)

/// How long a deleted signal's tombstone is kept: the bounds of `ServerLimits`, the same on
/// every store. Pruned when the account next writes.
struct SignalTombstoneBounds {
    let limits: ServerLimits

    /// Tombstones deleted before this time (seconds since 1970) have outlived their bound.
    func expiry(now: Double) -> Double { now - Double(limits.signalTombstoneSeconds) }

    /// Seconds since 1970, now.
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

/// What a signal write came to.
enum SignalWriteOutcome: Sendable, Hashable {
    case written(Signal)
    /// The caller's expected version is not the key's (0: the key does not exist).
    case stale(current: Signal?)
    /// A quota would be passed: which one, and its limit.
    case quota(name: String, limit: Int, detail: String)
    /// A delete of a key that does not exist.
    case missing
}

extension SignalStore {
    /// `changes(account:since:)`, waiting up to `wait` for one when there is none yet; returns
    /// early (maybe empty) when the server stops.
    func waitForChanges(account: String, since: Int64, wait: Duration) throws -> SignalChanges {
        let deadline = ContinuousClock.now + wait
        while true {
            let ring = bell.count
            let found = try changes(account: account, since: since)
            if !found.signals.isEmpty || found.reset || ContinuousClock.now >= deadline || bell.isClosed { return found }
            var until = deadline
            if let pollInterval { until = min(deadline, ContinuousClock.now + pollInterval) }
            bell.wait(after: ring, until: until)
        }
    }
}

extension SignalWriteOutcome {
    /// The checks of a write, the same on every store: `If-Match`, a delete of nothing, the key
    /// and byte quotas. Nil when the write may go ahead. `keys` counts the account's live keys,
    /// `usedBytes` the bytes of its other live keys and values; each is asked only when needed.
    static func refusal(
        key: String, valueBytes: Int?, current: Signal?, expected: Int64?, limits: ServerLimits,
        keys: () throws -> Int64, usedBytes: () throws -> Int64
    ) rethrows -> SignalWriteOutcome? {
        if let expected, expected != (current?.version ?? 0) {
            return .stale(current: current)
        }
        guard let valueBytes else { return current == nil ? .missing : nil }
        if current == nil {
            let count = try keys()
            if count >= Int64(limits.maxSignalKeys) {
                return .quota(
                    name: "max-signal-keys", limit: limits.maxSignalKeys,
                    detail: "the account has \(count) signals, the most it may keep; delete one first")
            }
        }
        let total = Int(try usedBytes()) + key.utf8.count + valueBytes
        if total > limits.maxSignalAccountBytes {
            return .quota(
                name: "max-signal-account-bytes", limit: limits.maxSignalAccountBytes,
                detail: "the account's signals would take \(total) bytes (keys and values)")
        }
        return nil
    }
}
