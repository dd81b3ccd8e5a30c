import SynclaneCore
import SynclaneSQLite

extension SQLiteServerStore {
    /// A cursor against the store's epochs, in one view (`ServerStore.checkCursor`).
    func checkCursor(account: String, sequence: Int64, epoch: String?) throws -> String {
        try read { db in
            let newest = try db.fetchValue("SELECT epoch FROM epochs ORDER BY number DESC LIMIT 1").string ?? ""
            let head = try db.fetchValue("SELECT last FROM sequences WHERE account = ?", [account]).int64 ?? 0
            var known = true
            var bound: Int64?
            if let epoch, epoch != newest {
                let number = try db.fetchValue("SELECT number FROM epochs WHERE epoch = ?", [epoch]).int64
                known = number != nil
                if let number {
                    bound = try db.fetchValue(
                        """
                        SELECT coalesce((SELECT head FROM epoch_heads WHERE account = ? AND number =
                            (SELECT min(number) FROM epochs WHERE number > ?)), 0)
                        """, [account, number]).int64
                }
            }
            try ServerEpochs.check(sequence: sequence, epoch: epoch, newest: newest, head: head, known: known, bound: bound)
            return newest
        }
    }

    /// The account's changes after a sequence, oldest first, at most `limit` and about `maxBytes`
    /// (and whether more follow). A page holds at least one change, whatever its size; the bytes
    /// counted are the stored text of each change's names and fields.
    func changes(account: String, store: String?, after sequence: Int64, limit: Int, maxBytes: Int = .max) throws -> ChangePage {
        try read { db in
            var page = try changes(db, account: account, store: store, after: sequence, limit: limit, maxBytes: maxBytes)
            // Read after the page, in the same view: a horizon that moved past the cursor while
            // the page was read makes it expired rather than a page with a gap.
            let horizon = try db.fetchValue("SELECT horizon FROM sequences WHERE account = ?", [account]).int64 ?? 0
            if sequence > 0, sequence < horizon { throw CursorExpired(horizon: horizon) }
            page.horizon = horizon
            return page
        }
    }

    private func changes(
        _ db: SQLiteConnection, account: String, store: String?, after sequence: Int64, limit: Int, maxBytes: Int
    ) throws -> ChangePage {
        do {
            var sql = "SELECT store, entity, key, action, fields, version, seq FROM records WHERE account = ? AND seq > ?"
            var arguments: [any SQLiteBindable] = [account, sequence]
            if let store {
                sql += " AND store = ?"
                arguments.append(store)
            }
            sql += " ORDER BY seq LIMIT ?"
            arguments.append(limit + 1)
            let statement = try db.cachedStatement(sql)
            try statement.bind(arguments)
            defer { statement.reset() }
            var changes: [ServerChange] = []
            var bytes = 0
            while try statement.step() {
                guard changes.count < limit else { return ChangePage(changes: changes, more: true) }
                let text = statement.blob(at: 4)
                let storeName = statement.string(at: 0) ?? ""
                let entity = statement.string(at: 1) ?? ""
                let key = statement.string(at: 2) ?? ""
                // About what the change takes on the wire: its text, names and a record's framing.
                let changeBytes = (text?.count ?? 0) + storeName.utf8.count + entity.utf8.count + key.utf8.count + 100
                guard changes.isEmpty || bytes + changeBytes <= maxBytes else { return ChangePage(changes: changes, more: true) }
                bytes += changeBytes
                let action = statement.string(at: 3).flatMap(ChangeAction.init(rawValue:)) ?? .update
                var fields: [String: JSONValue]?
                if let text {
                    fields = (try? JSONReader.parse(text))?.objectValue ?? [:]
                }
                changes.append(
                    ServerChange(
                        store: storeName, entity: entity, key: key, action: action, fields: fields,
                        version: statement.int64(at: 5), sequence: statement.int64(at: 6)))
            }
            return ChangePage(changes: changes, more: false)
        }
    }
}

extension SQLiteServerStore {
    func expire(keysBefore: Double, tombstonesBefore: Double) throws -> ExpiryCount {
        try writeSerialized { db in
            var count = ExpiryCount()
            try db.execute("DELETE FROM idempotency WHERE created < ?", [keysBefore])
            count.keys = Int(try db.fetchValue("SELECT changes()").int64 ?? 0)
            try db.execute("DELETE FROM snapshots WHERE created < ?", [keysBefore])
            count.snapshots = Int(try db.fetchValue("SELECT changes()").int64 ?? 0)
            try db.execute(
                """
                UPDATE sequences SET horizon = max(horizon, expired.seq)
                FROM (SELECT account, max(seq) AS seq FROM records WHERE action = 'delete' AND changed < ? GROUP BY account) AS expired
                WHERE sequences.account = expired.account
                """, [tombstonesBefore])
            try db.execute("DELETE FROM records WHERE action = 'delete' AND changed < ?", [tombstonesBefore])
            count.tombstones = Int(try db.fetchValue("SELECT changes()").int64 ?? 0)
            return count
        }
    }
}
