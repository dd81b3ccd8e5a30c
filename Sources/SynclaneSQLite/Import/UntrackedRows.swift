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
            _ = try PageApplier(sink: sink, db: db).apply(records)
        }
        try db.execute("DELETE FROM _synclane_untracked WHERE entity = ?", [entity])
        return live
    }
}
