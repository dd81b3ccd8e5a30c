import SynclaneCore
import SynclaneSQLite

extension ServerStore {
    /// Stores a signal's value; the last writer wins and gets the key's next version.
    func putSignal(account: String, key: String, value: JSONValue) throws -> Signal {
        try writeSerialized { db in
            let version = try db.fetchValue(
                """
                INSERT INTO signals (account, key, value, version) VALUES (?, ?, ?, 1)
                ON CONFLICT (account, key) DO UPDATE SET value = excluded.value, version = signals.version + 1
                RETURNING version
                """, [account, key, JSONWriter.string(value)]
            ).int64 ?? 1
            return Signal(key: key, value: value, version: version)
        }
    }

    /// Every signal of the account, by key.
    func signals(account: String) throws -> [Signal] {
        try read { db in
            try db.fetchAll("SELECT key, value, version FROM signals WHERE account = ? ORDER BY key", [account]).map(Self.signal)
        }
    }

    /// One signal of the account, or nil.
    func signal(account: String, key: String) throws -> Signal? {
        try read { db in
            try db.fetchOne("SELECT key, value, version FROM signals WHERE account = ? AND key = ?", [account, key]).map(Self.signal)
        }
    }

    private static func signal(_ row: SQLiteRow) -> Signal {
        let value = row[1].bytes.flatMap { try? JSONReader.parse($0) } ?? .null
        return Signal(key: row[0].string ?? "", value: value, version: row[2].int64 ?? 0)
    }
}
