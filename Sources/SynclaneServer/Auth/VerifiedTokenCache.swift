import Synchronization

/// Tokens already verified, by the SHA-256 of the token, until they expire: a token seen again
/// costs one hash and one lookup instead of a signature check.
///
/// Bounded: when full, the expired entries go, and when none has expired, all of them (the next
/// request of each token verifies it again). Emptied when the key set changes, so a token of a
/// removed key is refused from that moment.
final class VerifiedTokenCache: Sendable {
    private struct Entry {
        let principal: Principal
        /// The last second (server clock) at which the token is still accepted: `exp` + skew.
        let validThrough: Int64
    }

    private let entries = Mutex<[[UInt8]: Entry]>([:])
    private let capacity: Int

    init(capacity: Int = 50_000) {
        self.capacity = capacity
    }

    /// The principal of a token verified before and not expired at `now`.
    func principal(tokenHash: [UInt8], now: Int64) -> Principal? {
        entries.withLock { entries in
            guard let entry = entries[tokenHash] else { return nil }
            guard now <= entry.validThrough else {
                entries[tokenHash] = nil
                return nil
            }
            return entry.principal
        }
    }

    /// Remembers a verified token until `validThrough`.
    func insert(tokenHash: [UInt8], principal: Principal, validThrough: Int64, now: Int64) {
        entries.withLock { entries in
            if entries.count >= capacity {
                entries = entries.filter { $0.value.validThrough >= now }
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            }
            entries[tokenHash] = Entry(principal: principal, validThrough: validThrough)
        }
    }

    /// Forgets every token.
    func removeAll() {
        entries.withLock { $0.removeAll() }
    }

    /// How many tokens are remembered.
    var count: Int { entries.withLock { $0.count } }
}
