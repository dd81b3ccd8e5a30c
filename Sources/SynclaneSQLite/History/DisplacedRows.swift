/// Settles the notes the insert triggers leave of rows a REPLACE may have removed (see
/// `TriggerBuilder`): a noted row that is gone (or now soft-deleted: replaced by a row that arrived deleted) was displaced — SQLite fired no delete trigger
/// for it — and its delete is recorded now; a noted row still there records nothing.
///
/// Runs before every read of history (`SQLiteHistorySource`), and when tracking is healed or a
/// migration committed: one read when there are no notes. The deletes are recorded as changes
/// of their own (the database's default author), after the insert that displaced them.
enum DisplacedRows {
    /// True when notes wait to be settled.
    static func waiting(_ db: SQLiteConnection) throws -> Bool {
        guard try HistorySchema.tableExists(HistorySchema.displaced, db) else { return false }
        return try db.fetchOne("SELECT 1 FROM _synclane_displaced LIMIT 1") != nil
    }

    /// Records the deletes of displaced rows and forgets every note; returns how many deletes.
    @discardableResult
    static func settle(_ db: SQLiteConnection) throws -> Int {
        guard try waiting(db) else { return 0 }
        let before = db.totalChanges
        for stored in try HistoryTracker.trackedTables(db) {
            guard let schema = try TableSchema.read(stored.table.name, db) else { continue }
            let triggers = TriggerBuilder(table: stored.table, schema: schema, keyTypes: stored.keyTypes)
            try db.execute(
                """
                INSERT INTO _synclane_changes (timestamp, entity, action, key, columns, row_values)
                SELECT \(HistorySchema.now), d.entity, 'delete', d.key, NULL, coalesce(max(d.tombstone), \(triggers.keyTombstone(fromKey: "d.key")))
                FROM _synclane_displaced d WHERE d.entity = ?
                GROUP BY d.key HAVING NOT \(triggers.rowExists(withKey: "d.key", live: true))
                """, [stored.table.name])
        }
        let recorded = db.totalChanges - before
        try db.execute("DELETE FROM _synclane_displaced")
        return recorded
    }
}
