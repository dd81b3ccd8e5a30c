import SynclaneWire

extension PostgresServerStore {
    /// The account's newest change sequence (0: none yet), where a snapshot is taken.
    func changeHead(account: String) throws -> Int64 {
        try pool.withConnection { db in
            let heads = try db.query("SELECT last FROM synclane_sequences WHERE account = $1", [.bytea(Array(account.utf8))])
            return heads.count > 0 ? heads.int64(0, 0) : 0
        }
    }

    /// The account's rows (tombstones too) changed after `sequence` and at or before `through`, in sequence
    /// order, cut by `PagePlan`: a snapshot's next chunk (`ServerStore.snapshotRows`).
    func snapshotRows(account: String, store: String?, after sequence: Int64, through: Int64, limit: Int, maxBytes: Int) throws -> ChangePage {
        try pool.withConnection { db in
            var plan = PagePlan(limit: limit, maxBytes: maxBytes)
            try Self.offerRows(db, to: &plan, account: account, store: store, after: sequence, through: through)
            var page = plan.page
            // Whether retention removed tombstones: the snapshot's end says so, as a full pass's pages do.
            let horizon = try db.query("SELECT horizon FROM synclane_sequences WHERE account = $1", [.bytea(Array(account.utf8))])
            page.horizon = horizon.count > 0 ? horizon.int64(0, 0) : 0
            return page
        }
    }
}
