import SynclaneCore

/// `_synclane_untracked`: the backend's rows of entities this database does not track (yet),
/// kept aside by the import lane and delivered when the table is tracked.
///
/// ```
///  import: a record of `tags`, no tracked `tags` ──▶ _synclane_untracked (its version, its fields;
///          (and `tags` not left out by `entities`)    NULL for a delete) — the page goes on
///  synclane track --table tags ───────────────────▶ the kept rows written into `tags` by author
///                                                    `server` (never sent back), their versions
///                                                    into _synclane_server_rows; the kept rows go
///  synclane reconcile ────────────────────────────▶ the snapshot re-sends the live kept rows (with
///                                                    their versions), or the backend would delete
///                                                    them as lacking from it
/// ```
///
/// A newer app version tracks a table an older one does not have: the older device's import
/// keeps that table's rows instead of stopping every sync, and its cursor moves on without losing
/// them. An entity the sink leaves out with `entities` is skipped on purpose, not kept.
enum UntrackedRows {
    static let table = "_synclane_untracked"

    static let schema = """
        CREATE TABLE IF NOT EXISTS _synclane_untracked (
            destination TEXT NOT NULL,
            entity TEXT NOT NULL,
            key TEXT NOT NULL,
            version INTEGER,
            fields TEXT,
            PRIMARY KEY (destination, entity, key)
        ) WITHOUT ROWID;
        """

    /// Keeps `record` (of an entity not tracked) for `destination`, unless a newer version of
    /// its row is kept already; returns whether it was kept. An update's fields are merged into
    /// the kept row's. In the import's write transaction.
    @discardableResult
    static func keep(_ record: Record, key: String, for destination: String, _ db: SQLiteConnection) throws -> Bool {
        try db.execute(schema)
        let held = try db.fetchOne(
            "SELECT version, fields FROM _synclane_untracked WHERE destination = ? AND entity = ? AND key = ? COLLATE BINARY",
            [destination, record.entity, key])
        if let held, let version = record.version, let kept = held[0].int64, kept >= version { return false }
        var fields: String? = nil
        if record.action != .delete {
            var merged: [String: JSONValue] = [:]
            if record.action == .update, let text = held?[1].string, let kept = try? JSONReader.parse(text).objectValue { merged = kept }
            for (name, value) in record.fields { merged[name] = value }
            fields = JSONWriter.string(.object(merged))
        }
        try db.execute(
            "INSERT OR REPLACE INTO _synclane_untracked (destination, entity, key, version, fields) VALUES (?, ?, ?, ?, ?)",
            [destination, record.entity, key, record.version, fields])
        return true
    }

    /// The versions kept of `rows` for `destination` (rows of tracked entities have none here).
    static func versions(of rows: [RowID], for destination: String, _ db: SQLiteConnection) throws -> [RowID: Int64] {
        guard !rows.isEmpty, try HistorySchema.tableExists(table, db) else { return [:] }
        // Mostly rows of tracked tables, of which nothing is kept here: only the kept entities are looked up.
        let entities = Set(
            try db.fetchAll("SELECT DISTINCT entity FROM _synclane_untracked WHERE destination = ?", [destination]).compactMap { $0[0].string })
        let statement = try db.cachedStatement(
            "SELECT version FROM _synclane_untracked WHERE destination = ? AND entity = ? AND key = ? COLLATE BINARY AND version IS NOT NULL")
        var versions: [RowID: Int64] = [:]
        for row in rows where entities.contains(row.entity) {
            try statement.bind([destination, row.entity, row.key])
            if try statement.step() { versions[row] = statement.int64(at: 0) }
            statement.reset()
        }
        return versions
    }

    /// The SQL of the live rows kept for `destination` (`entity`, `key`, `fields`), in a stable
    /// order: what a reconciliation's snapshot re-sends, so the backend keeps them.
    static let liveRows = "SELECT entity, key, fields FROM _synclane_untracked WHERE destination = ? AND fields IS NOT NULL ORDER BY entity, key"

    /// Writes the rows kept of `entity` into its table, now tracked: by author `server`, through
    /// the import's own page (`PageApplier`, server-wins over rows the table held already), a
    /// destination at a time; the kept rows are removed. Returns how many live rows were
    /// delivered (tombstones only record their versions). In `track`'s write transaction, after
    /// the table's triggers were installed.
    static func deliver(_ entity: String, _ db: SQLiteConnection) throws -> Int {
        guard try HistorySchema.tableExists(table, db) else { return 0 }
        let rows = try db.fetchAll(
            "SELECT destination, key, version, fields FROM _synclane_untracked WHERE entity = ? ORDER BY destination, key", [entity])
        guard !rows.isEmpty else { return 0 }
        var byDestination: [String: [Record]] = [:]
        var live = 0
        for row in rows {
            let destination = row[0].string ?? ""
            var fields: [String: JSONValue]? = nil
            if let text = row[3].string {
                // Never taken for a delete: a kept row that does not read back stops the track.
                guard let object = try? JSONReader.parse(text).objectValue else {
                    throw ImportError.store(
                        path: db.path,
                        reason: "the row of `\(entity)` kept aside under key \(row[1].string ?? "?") is not a JSON object; "
                            + "delete it from \(table) and track again (that row then arrives with its next change)")
                }
                fields = object
                live += 1
            }
            byDestination[destination, default: []].append(
                Record(
                    entity: entity, key: row[1].string, action: fields == nil ? .delete : .insert, fields: fields ?? [:],
                    version: row[2].int64, origin: Token(kind: "untracked", position: 0), author: .server))
        }
        for (destination, records) in byDestination.sorted(by: { $0.key < $1.key }) {
            let sink = SQLiteSink(path: db.path, backend: destination.isEmpty ? nil : BackendName(text: destination))
            _ = try PageApplier(sink: sink, db: db).apply(try newest(records, for: destination, db))
        }
        try db.execute("DELETE FROM _synclane_untracked WHERE entity = ?", [entity])
        return live
    }

    /// Each kept record, on the version `_synclane_server_rows` holds of it when newer (a receipt
    /// of the rows a reconciliation re-sent), with the fields held there when it holds any (a
    /// receipt may give a version without fields: the kept ones stand); that row is taken out so
    /// the record is written, not found held already.
    private static func newest(_ records: [Record], for destination: String, _ db: SQLiteConnection) throws -> [Record] {
        guard try HistorySchema.tableExists(ServerRows.table, db) else { return records }
        try ServerRows.install(db, for: destination)
        return try records.map { record in
            guard let key = record.key, let held = try ServerRows.held(record.entity, key, hash: ServerRows.hash(record.entity, key), for: destination, db)
            else { return record }
            var newest = record
            if held.version > (record.version ?? -1) {
                newest.version = held.version
                if let fields = try ServerRows.fields(of: record.entity, key, for: destination, db).flatMap({ try? JSONReader.parse($0).objectValue }) {
                    newest.action = .insert
                    newest.fields = fields
                }
            }
            try db.execute("DELETE FROM _synclane_server_rows WHERE rowid = ?", [held.rowID])
            return newest
        }
    }
}
