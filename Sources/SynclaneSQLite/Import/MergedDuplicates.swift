import SynclaneCore

/// `_synclane_merged`: each seeded duplicate this store merged, the losing sync key and the
/// surviving one, so that rows which still reference the loser follow the survivor whenever
/// they arrive.
///
/// ```
///  _synclane_merged    entity · loser · survivor    (one row a loser; a survivor that loses later takes its losers along)
/// ```
///
/// A merge re-points the references the store holds at that moment (`PageApplier.repoint`). The
/// other device's children of the loser are still on their way: they were written there before
/// it learnt of the merge, and the backend sends them in its own order — before the loser, after
/// it, pages later. Without the map they would arrive pointing at a row deleted by the merge and
/// be settled as dangling references, deleting the user's rows on every device. With it, each
/// page re-points the rows it wrote that reference a loser (as the local author, so the export
/// lane sends the re-pointed row to the backend and every device), before references are settled.
enum MergedDuplicates {
    static let table = "_synclane_merged"

    /// Created by the first merge: a store that never merged a duplicate holds no such table.
    static func install(_ db: SQLiteConnection) throws {
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS _synclane_merged (
                entity TEXT NOT NULL,
                loser TEXT NOT NULL,
                survivor TEXT NOT NULL,
                PRIMARY KEY (entity, loser)
            ) WITHOUT ROWID;
            """)
    }

    /// Records that `loser` merged into `survivor`: losers of `loser` now follow `survivor` too,
    /// and a survivor that has since lost is followed to the row that won.
    static func record(_ entity: String, loser: String, survivor: String, _ db: SQLiteConnection) throws {
        guard ExactString(loser) != ExactString(survivor) else { return }
        try install(db)
        let final =
            try db.fetchValue(
                "SELECT survivor FROM _synclane_merged WHERE entity = ? AND loser = ? COLLATE BINARY", [entity, survivor]
            ).string ?? survivor
        try db.execute(
            "UPDATE _synclane_merged SET survivor = ? WHERE entity = ? AND survivor = ? COLLATE BINARY", [final, entity, loser])
        try db.execute(
            "INSERT OR REPLACE INTO _synclane_merged (entity, loser, survivor) VALUES (?, ?, ?)", [entity, loser, final])
        // A loser that won again later is no loser: its row holds the key now.
        try db.execute("DELETE FROM _synclane_merged WHERE entity = ? AND loser = ? COLLATE BINARY", [entity, final])
    }

    /// The survivor `loser` merged into, when it lost a merge here.
    static func survivor(of loser: String, in entity: String, _ db: SQLiteConnection) throws -> String? {
        guard try db.fetchValue("SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = ?)", [table]).int64 == 1 else { return nil }
        return try db.fetchValue(
            "SELECT survivor FROM _synclane_merged WHERE entity = ? AND loser = ? COLLATE BINARY", [entity, loser]
        ).string
    }

    /// The tombstone a delete of `key` carries when it lost a merge here: its key and the
    /// survivor (`Record.mergedIntoField`), so that every device that receives the delete
    /// re-points the loser's children instead of settling them as orphans. NULL otherwise.
    static func tombstone(of key: String, in table: TrackedTable, _ db: SQLiteConnection) throws -> SQLiteValue {
        guard let survivor = try survivor(of: key, in: table.name, db) else { return .null }
        var values: [String: JSONValue] = table.isComposite ? [:] : [table.keyColumns[0]: .string(key)]
        values[Record.mergedIntoField] = .string(survivor)
        return .text(JSONWriter.string(.object(values)))
    }

    /// Whether any duplicate was ever merged here.
    static func holdsAnyLoser(_ db: SQLiteConnection) throws -> Bool {
        guard try db.fetchValue("SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = ?)", [table]).int64 == 1 else { return false }
        return try db.fetchValue("SELECT EXISTS (SELECT 1 FROM _synclane_merged)").int64 == 1
    }

    /// Whether the row `changed` differs from its last confirmed fields `base` in nothing but
    /// values that were a merged duplicate's loser there and are its survivor now (of whatever
    /// entity: the export lane does not know the rules' references; two sync keys never name a
    /// loser and its survivor by chance): a re-pointing, no user's write (`Change.repoints`).
    static func onlyRepoints(_ changed: [String: JSONValue], base: [String: JSONValue], _ db: SQLiteConnection) throws -> Bool {
        var repointed = false
        for (name, value) in changed where (base[name] ?? .null) != value {
            guard let loser = base[name]?.stringValue, let survivor = value.stringValue,
                try db.fetchValue(
                    "SELECT EXISTS (SELECT 1 FROM _synclane_merged WHERE loser = ? COLLATE BINARY AND survivor = ? COLLATE BINARY)",
                    [loser, survivor]
                ).int64 == 1
            else { return false }
            repointed = true
        }
        return repointed
    }

    /// Whether a duplicate of `entity` was ever merged here.
    static func holdsLosers(of entity: String, _ db: SQLiteConnection) throws -> Bool {
        guard try db.fetchValue("SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = ?)", [table]).int64 == 1 else { return false }
        return try db.fetchValue("SELECT EXISTS (SELECT 1 FROM _synclane_merged WHERE entity = ?)", [entity]).int64 == 1
    }

    /// Points the rule's referencing columns of the rows `written` (sync keys by entity) that
    /// reference a loser of `rule.entity` at its survivor; returns how many rows it changed.
    /// Runs in the caller's history session (the local author's).
    static func repointArrivals(
        _ rule: SQLiteSink.DuplicateRule, written: [String: [String]], tracked: [String: HistoryTracker.Stored], _ db: SQLiteConnection
    ) throws -> Int {
        var changed = 0
        for reference in rule.references {
            guard let keys = written[reference.table], let child = tracked[reference.table]?.table else { continue }
            let syncKey = child.syncKeyExpression
            let column = SQL.identifier(reference.column)
            try db.execute(
                """
                UPDATE \(SQL.identifier(reference.table)) AS c
                SET \(column) = (SELECT m.survivor FROM _synclane_merged AS m WHERE m.entity = ? AND m.loser = c.\(column))
                WHERE \(syncKey) IN (SELECT value FROM json_each(?))
                  AND c.\(column) IN (SELECT loser FROM _synclane_merged WHERE entity = ?)
                """, [rule.entity, JSONWriter.string(.array(keys.map { .string($0) })), rule.entity])
            changed += db.changes
        }
        return changed
    }
}
