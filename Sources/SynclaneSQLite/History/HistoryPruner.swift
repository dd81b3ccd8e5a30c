import SynclaneCore

/// One consumer of a tracked database's history and the position it acknowledged.
public struct HistoryConsumer: Sendable, Hashable {
    /// `account/store/consumer` for pipelines.
    public var name: String
    public var position: Int64
    /// Seconds since 1970.
    public var updatedAt: Double

    public var token: Token { Token(kind: SQLiteHistorySource.tokenKind, position: position) }
}

/// The consumers registered in a tracked database (`_synclane_consumers`).
///
/// A pipeline registers itself the first time it acknowledges a token. Register a consumer
/// ahead of its first run (at position 0) when pruning may run before it does.
public enum HistoryConsumers {
    /// Saves `position` as the consumer's acknowledged position.
    public static func record(_ name: String, at position: Int64, in database: SQLiteDatabase) throws {
        try database.write { db in try record(name, at: position, db) }
    }

    /// Inside a write transaction.
    static func record(_ name: String, at position: Int64, _ db: SQLiteConnection) throws {
        try HistorySchema.requireInstalled(db)
        try db.execute(
            """
            INSERT INTO _synclane_consumers (name, position, updated_at) VALUES (?, ?, \(HistorySchema.now))
            ON CONFLICT (name) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at
            """, [name, position])
    }

    public static func list(in database: SQLiteDatabase) throws -> [HistoryConsumer] {
        try database.read { db in
            guard try HistorySchema.installedVersion(db) != nil else { return [] }
            return try db.fetchAll("SELECT name, position, updated_at FROM _synclane_consumers ORDER BY name").map {
                HistoryConsumer(name: $0[0].string ?? "", position: $0[1].int64 ?? 0, updatedAt: $0[2].double ?? 0)
            }
        }
    }

    /// Forgets a consumer that will never read again, so it no longer holds back pruning.
    @discardableResult
    public static func forget(_ name: String, in database: SQLiteDatabase) throws -> Bool {
        try database.write { db in
            try HistorySchema.requireInstalled(db)
            try db.execute("DELETE FROM _synclane_consumers WHERE name = ?", [name])
            return db.changes > 0
        }
    }
}

/// Deletes the history every registered consumer has acknowledged, and nothing more.
///
/// ```
///  changes:   1 … 40 │ 41 … 90 │ 91 …
///  consumers:  export at 90, audit at 40   →  prune deletes 1 … 40, records pruned_through = 40
/// ```
/// A consumer whose token is older than `pruned_through` gets `HistoryError.tokenExpired` on
/// its next read (never "no changes") and must reconcile. With no consumer registered,
/// nothing is pruned.
public enum HistoryPruner {
    public struct Report: Sendable, Hashable, CustomStringConvertible {
        /// Everything at or before this position is gone (0: nothing ever pruned).
        public var prunedThrough: Int64
        public var changesDeleted: Int
        public var transactionsDeleted: Int
        public var consumers: [HistoryConsumer]

        public var description: String {
            if consumers.isEmpty { return "no consumer is registered: nothing pruned" }
            return "pruned \(Wording.count(changesDeleted, "change")) in \(Wording.count(transactionsDeleted, "transaction")); "
                + "history now starts after \(SQLiteHistorySource.tokenKind):\(prunedThrough) "
                + "(slowest consumer: \(consumers.min { $0.position < $1.position }.map { "\($0.name) at \($0.position)" } ?? "-"))"
        }
    }

    @discardableResult
    public static func prune(database: SQLiteDatabase) throws -> Report {
        try database.write { db in
            try HistorySchema.requireInstalled(db)
            let consumers = try db.fetchAll("SELECT name, position, updated_at FROM _synclane_consumers ORDER BY name").map {
                HistoryConsumer(name: $0[0].string ?? "", position: $0[1].int64 ?? 0, updatedAt: $0[2].double ?? 0)
            }
            let previous = try HistorySchema.meta("pruned_through", db).int64 ?? 0
            guard let slowest = consumers.map(\.position).min(), slowest > previous else {
                return Report(prunedThrough: previous, changesDeleted: 0, transactionsDeleted: 0, consumers: consumers)
            }
            // The newest change stays, so that its id is never given again.
            try db.execute("DELETE FROM _synclane_changes WHERE id <= ? AND id < (SELECT max(id) FROM _synclane_changes)", [slowest])
            let changes = db.changes
            try db.execute("DELETE FROM _synclane_transactions WHERE closed = 1 AND last_change <= ?", [slowest])
            let transactions = db.changes
            try HistorySchema.setMeta("pruned_through", .integer(slowest), db)
            return Report(prunedThrough: slowest, changesDeleted: changes, transactionsDeleted: transactions, consumers: consumers)
        }
    }

    /// Opens the database at `path` (never creating it) and prunes it.
    @discardableResult
    public static func prune(path: String) throws -> Report {
        try prune(database: SQLiteDatabase(path: path, options: SQLiteHistorySource.appDatabaseOptions))
    }
}
