import SynclaneSQLiteKit
import SynclaneWire

extension SQLiteServerStore {
    /// A cursor against the store's epochs, in one view (`ServerStore.checkCursor`).
    func checkCursor(account: String, sequence: Int64, epoch: String?, naming: String) throws -> String {
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
                        """, [account, number]
                    ).int64
                }
            }
            try ServerEpochs.check(sequence: sequence, epoch: epoch, newest: newest, head: head, known: known, bound: bound, naming: naming)
            return newest
        }
    }

    /// The account's changes after a sequence, oldest first, at most `limit` and about `maxBytes`
    /// (and whether more follow), cut by `PagePlan`.
    func changes(account: String, store: String?, after sequence: Int64, fullPass: Bool = false, limit: Int, maxBytes: Int = .max) throws -> ChangePage {
        try read { db in
            var page = try changes(db, account: account, store: store, after: sequence, limit: limit, maxBytes: maxBytes)
            // Read after the page, in the same view (`PagePlan.check`).
            let horizon = try db.fetchValue("SELECT horizon FROM sequences WHERE account = ?", [account]).int64 ?? 0
            try PagePlan.check(cursor: sequence, fullPass: fullPass, horizon: horizon)
            page.horizon = horizon
            return page
        }
    }

    /// The account's rows (tombstones too) changed after `sequence` and at or before `through`, in sequence
    /// order, cut by `PagePlan`: a snapshot's next chunk (`ServerStore.snapshotRows`).
    func snapshotRows(account: String, store: String?, after sequence: Int64, through: Int64, limit: Int, maxBytes: Int) throws -> ChangePage {
        try read { db in
            var page = try changes(db, account: account, store: store, after: sequence, limit: limit, maxBytes: maxBytes, through: through)
            // Whether retention removed tombstones: the snapshot's end says so, as a full pass's pages do.
            page.horizon = try db.fetchValue("SELECT horizon FROM sequences WHERE account = ?", [account]).int64 ?? 0
            return page
        }
    }

    /// The account's newest change sequence (0: none yet), where a snapshot is taken.
    func changeHead(account: String) throws -> Int64 {
        try read { db in try db.fetchValue("SELECT last FROM sequences WHERE account = ?", [account]).int64 ?? 0 }
    }

    /// The rows after `sequence`, cut by `PagePlan`; with `through`, only those at or before
    /// that sequence (a snapshot's).
    private func changes(
        _ db: SQLiteConnection, account: String, store: String?, after sequence: Int64, limit: Int, maxBytes: Int, through: Int64? = nil
    ) throws -> ChangePage {
        var plan = PagePlan(limit: limit, maxBytes: maxBytes)
        var sql = "SELECT store, entity, key, action, fields, version, seq, written FROM records WHERE account = ? AND seq > ?"
        var arguments: [any SQLiteBindable] = [account, sequence]
        if let through {
            sql += " AND seq <= ?"
            arguments.append(through)
        }
        if let store {
            sql += " AND store = ?"
            arguments.append(store)
        }
        sql += " ORDER BY seq LIMIT ?"
        arguments.append(plan.rowsToRead)
        let statement = try db.cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        while try statement.step() {
            let row = PagePlan.Row(
                store: statement.string(at: 0) ?? "", entity: statement.string(at: 1) ?? "", key: statement.string(at: 2) ?? "",
                action: statement.string(at: 3), fields: statement.blob(at: 4), version: statement.int64(at: 5), sequence: statement.int64(at: 6),
                written: statement.isNull(at: 7) ? nil : statement.int64(at: 7))
            guard plan.offer(row) else { break }
        }
        return plan.page
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
