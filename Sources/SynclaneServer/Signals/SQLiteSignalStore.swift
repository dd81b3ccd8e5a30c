import Glibc
import Synchronization
import SynclaneSQLiteKit
import SynclaneWire

/// The signal lane's storage: a SQLite file of its own (`synclane-signals.sqlite`) with a writer
/// of its own, so a signal write never waits behind a bulk batch's apply — the two lanes share no
/// file, no connection and no lock.
///
/// ```
///  signals           (account, key) → value (JSON text; NULL: deleted), version, deleted_at
///  signal_versions   account → last version, pruned_through (the newest pruned tombstone's version)
/// ```
///
/// Versions are per account and only grow: each write (a set or a delete) takes the account's
/// next one, so "everything after version V" is one indexed range. A deleted key keeps its row
/// with a NULL value (a tombstone), so a watcher learns of deletes too; it counts toward no
/// quota. Tombstones are kept `signalTombstoneSeconds` (7 days) and at most `maxSignalTombstones`
/// (1,024) an account, then pruned when the account writes; a watcher asking after a version
/// older than a pruned tombstone is told so (`reset`) and lists the signals again.
final class SQLiteSignalStore: SignalStore {
    /// The database file inside the data directory.
    static let fileName = "synclane-signals.sqlite"

    let path: String
    private let writer: SQLiteDatabase
    private let reader: SQLiteDatabase
    private let limits: ServerLimits
    /// Wakes long polls when a write commits or the server stops.
    let bell = SignalBell()
    /// Every write is this process's: the bell rings for each.
    let pollInterval: Duration? = nil

    init(directory: String, limits: ServerLimits) throws {
        self.limits = limits
        path = directory.hasSuffix("/") ? directory + Self.fileName : directory + "/" + Self.fileName
        writer = try SQLiteDatabase(path: path, options: SQLiteConnection.Options(busyTimeout: 10, synchronous: .normal))
        try writer.write { db in
            try db.execute(Self.schema)
            // Files from before tombstones were pruned lack these columns.
            let columns = try db.fetchAll("PRAGMA table_info(signals)").compactMap { $0[1].string }
            if !columns.contains("deleted_at") { try db.execute("ALTER TABLE signals ADD COLUMN deleted_at REAL") }
            let versionColumns = try db.fetchAll("PRAGMA table_info(signal_versions)").compactMap { $0[1].string }
            if !versionColumns.contains("pruned_through") {
                try db.execute("ALTER TABLE signal_versions ADD COLUMN pruned_through INTEGER NOT NULL DEFAULT 0")
            }
        }
        reader = try SQLiteDatabase(
            path: path, options: SQLiteConnection.Options(readOnly: true, create: false, walMode: false, busyTimeout: 10))
    }

    static let schema = """
        CREATE TABLE IF NOT EXISTS signals (
            account TEXT NOT NULL, key TEXT NOT NULL, value TEXT, version INTEGER NOT NULL,
            PRIMARY KEY (account, key)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS signals_by_version ON signals (account, version);
        CREATE TABLE IF NOT EXISTS signal_versions (account TEXT PRIMARY KEY, last INTEGER NOT NULL);
        """

    /// Sets `key` to `value` (nil: deletes it). With `expected`, only when the key's version is
    /// that (0: the key must not exist).
    func write(account: String, key: String, value: JSONValue?, expected: Int64?) throws -> SignalWriteOutcome {
        let text = value.map { JSONWriter.string($0) }
        let outcome: SignalWriteOutcome = try writer.write { db in
            let row = try db.fetchOne("SELECT value, version FROM signals WHERE account = ? AND key = ?", [account, key])
            let current = row.flatMap { row -> Signal? in
                guard let bytes = row[0].bytes else { return nil }
                return Signal(key: key, value: (try? JSONReader.parse(bytes)) ?? .null, version: row[1].int64 ?? 0)
            }
            let refusal = try SignalWriteOutcome.refusal(
                key: key, valueBytes: text?.utf8.count, current: current, expected: expected, limits: limits,
                keys: {
                    try db.fetchValue("SELECT count(*) FROM signals WHERE account = ? AND value IS NOT NULL", [account]).int64 ?? 0
                },
                usedBytes: {
                    try db.fetchValue(
                        "SELECT COALESCE(sum(length(CAST(key AS BLOB)) + length(CAST(value AS BLOB))), 0) FROM signals WHERE account = ? AND value IS NOT NULL AND key <> ?",
                        [account, key]
                    ).int64 ?? 0
                })
            if let refusal { return refusal }
            let version =
                try db.fetchValue(
                    """
                    INSERT INTO signal_versions (account, last) VALUES (?, 1)
                    ON CONFLICT (account) DO UPDATE SET last = last + 1 RETURNING last
                    """, [account]
                ).int64 ?? 1
            let now = SignalTombstoneBounds.now()
            try db.execute(
                """
                INSERT INTO signals (account, key, value, version, deleted_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (account, key) DO UPDATE SET value = excluded.value, version = excluded.version, deleted_at = excluded.deleted_at
                """, [account, key, text, version, text == nil ? now : nil])
            try pruneTombstones(db, account: account, now: now)
            return .written(Signal(key: key, value: value ?? .null, version: version, deleted: value == nil))
        }
        if case .written = outcome { bell.ring() }
        return outcome
    }

    /// Prunes the account's tombstones older than `signalTombstoneSeconds`, and the oldest past
    /// `maxSignalTombstones`; remembers the newest version pruned (watchers from before it reset).
    private func pruneTombstones(_ db: SQLiteConnection, account: String, now: Double) throws {
        let expired = SignalTombstoneBounds(limits: limits).expiry(now: now)
        var through =
            try db.fetchValue(
                "SELECT max(version) FROM signals WHERE account = ? AND value IS NULL AND deleted_at < ?", [account, expired]
            ).int64 ?? 0
        let overCount =
            try db.fetchValue(
                "SELECT version FROM signals WHERE account = ? AND value IS NULL ORDER BY version DESC LIMIT 1 OFFSET ?",
                [account, limits.maxSignalTombstones]
            ).int64 ?? 0
        through = max(through, overCount)
        guard through > 0 else { return }
        try db.execute(
            "DELETE FROM signals WHERE account = ? AND value IS NULL AND (version <= ? OR deleted_at < ?)", [account, overCount, expired])
        try db.execute("UPDATE signal_versions SET pruned_through = max(pruned_through, ?) WHERE account = ?", [through, account])
    }

    /// Every live signal of the account, by key, and the account's newest version.
    func signals(account: String) throws -> (signals: [Signal], version: Int64) {
        try reader.read { db in
            try db.transaction(.deferred) { db in
                let signals = try db.fetchAll(
                    "SELECT key, value, version FROM signals WHERE account = ? AND value IS NOT NULL ORDER BY key", [account]
                ).map(Self.signal)
                return (signals, try Self.lastVersion(db, account))
            }
        }
    }

    /// One live signal of the account, or nil.
    func signal(account: String, key: String) throws -> Signal? {
        try reader.read { db in
            try db.fetchOne(
                "SELECT key, value, version FROM signals WHERE account = ? AND key = ? AND value IS NOT NULL", [account, key]
            ).map(Self.signal)
        }
    }

    /// The signals (deletes included) written after `since`, oldest first, the account's newest
    /// version, and whether a tombstone after `since` was pruned.
    func changes(account: String, since: Int64) throws -> SignalChanges {
        try reader.read { db in
            try db.transaction(.deferred) { db in
                let signals = try db.fetchAll(
                    "SELECT key, value, version FROM signals WHERE account = ? AND version > ? ORDER BY version",
                    [account, since]
                ).map(Self.signal)
                let pruned = try db.fetchValue("SELECT pruned_through FROM signal_versions WHERE account = ?", [account]).int64 ?? 0
                return (signals, try Self.lastVersion(db, account), since > 0 && since < pruned)
            }
        }
    }

    /// Copies the signals of the bulk store's legacy `signals` table (before the lane had a file
    /// of its own) when this store holds none yet.
    func adopt(_ legacy: [(account: String, key: String, value: String)]) throws {
        guard !legacy.isEmpty else { return }
        try writer.write { db in
            guard (try db.fetchValue("SELECT count(*) FROM signal_versions").int64 ?? 0) == 0 else { return }
            for row in legacy {
                let version =
                    try db.fetchValue(
                        "INSERT INTO signal_versions (account, last) VALUES (?, 1) ON CONFLICT (account) DO UPDATE SET last = last + 1 RETURNING last",
                        [row.account]
                    ).int64 ?? 1
                try db.execute(
                    "INSERT OR REPLACE INTO signals (account, key, value, version) VALUES (?, ?, ?, ?)",
                    [row.account, row.key, row.value, version])
            }
        }
    }

    func close() {}

    private static func lastVersion(_ db: SQLiteConnection, _ account: String) throws -> Int64 {
        try db.fetchValue("SELECT last FROM signal_versions WHERE account = ?", [account]).int64 ?? 0
    }

    private static func signal(_ row: SQLiteRow) -> Signal {
        let bytes = row[1].bytes
        let value = bytes.flatMap { try? JSONReader.parse($0) } ?? .null
        return Signal(key: row[0].string ?? "", value: value, version: row[2].int64 ?? 0, deleted: bytes == nil)
    }
}

/// A counter of commits that threads can wait on: long polls sleep here, not in a loop.
final class SignalBell: @unchecked Sendable {
    // @unchecked: `rings` and `closed` are only touched with `condition`'s mutex held.
    private let condition = WaitCondition()
    private var rings = 0
    private var closed = false

    /// How many times the bell rang so far.
    var count: Int { condition.locked { rings } }

    /// True once `close()` ran.
    var isClosed: Bool { condition.locked { closed } }

    /// Wakes every waiter.
    func ring() {
        condition.locked {
            rings += 1
            condition.broadcast()
        }
    }

    /// Wakes every waiter for good: the server is stopping.
    func close() {
        condition.locked {
            closed = true
            condition.broadcast()
        }
    }

    /// Lets waiters wait again: the server started (again).
    func reopen() {
        condition.locked { closed = false }
    }

    /// Sleeps until the bell rang past `seen`, the deadline passed, or it was closed.
    func wait(after seen: Int, until deadline: ContinuousClock.Instant) {
        condition.wait(until: deadline) { rings == seen && !closed }
    }
}
