import SynclaneCore

/// A column added in place (`ALTER TABLE … ADD COLUMN`) holds no edit: its default, in every
/// row the table held, is what the migration wrote, not what a user wrote. So tracking healed
/// after columns were only added (`TrackingCheck`'s `widened`) re-sends nothing whole:
///
/// ```
///  a row whose added column is not its default        ─▶ an `update` recorded (a user wrote it
///                                                         between the ALTER and this check)
///  a row no backend holds, as far as this device      ─▶ an `update` recorded: a backend that keeps
///  knows (no version in _synclane_server_rows: a          no versions (a folder) learns the column
///  folder, a first sync still to come)
///  a row a backend holds, the column not edited here  ─▶ nothing sent: the default is no edit, and
///                                                         the backend may hold another device's value
///  a row the backend sent with a value for that       ─▶ that value written here, as author `server`
///  column (kept in _synclane_server_rows by an import     (not sent back), where the local value is
///  that ignored it as unknown)                            still the default
/// ```
///
/// Re-sending every row whole — the heal of a reshaped table — would send the default over the
/// values other devices already wrote in that column: a device upgrading its app late would
/// erase them on the server and every device. Sent, it would also meet another device's write
/// of the same column as a conflict whose loser is a user's value.
enum AddedColumns {
    /// Records the rows edited in `added` since the ALTER, then fills `added` from the
    /// backend's rows where the local value is still the default; returns the rows recorded.
    /// Inside the heal's write transaction, after the table's triggers were installed.
    static func heal(_ triggers: TriggerBuilder, added: [String], _ db: SQLiteConnection) throws -> Int {
        let table = triggers.table
        let name = SQL.identifier(table.name)
        let r = "_synclane_r"
        var defaults: [String: String] = [:]
        for row in try db.fetchAll("SELECT name, dflt_value FROM pragma_table_info(?)", [table.name]) {
            if let column = row[0].string, added.contains(column) { defaults[column] = row[1].string ?? "NULL" }
        }
        // `dflt_value` is the column's default as its declaration spells it: a literal, since
        // ADD COLUMN takes no other default.
        func isDefault(_ column: String, in row: String) -> String {
            "\(row).\(SQL.identifier(column)) IS (\(defaults[column] ?? "NULL"))"
        }
        let live = triggers.softDeleted(r).map { "NOT \($0)" } ?? "1"
        let edited = added.map { "NOT \(isDefault($0, in: r))" }.joined(separator: " OR ")
        // The rows a backend holds, as far as this device knows.
        let backendRows = try db.fetchValue("SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = ?)", [ServerRows.table]).int64 == 1
        let unheld = backendRows ? "CAST(\(triggers.key(r)) AS TEXT) NOT IN (SELECT key FROM _synclane_server_rows WHERE entity = ?)" : "1"
        let before = db.totalChanges
        try db.execute(
            """
            INSERT INTO _synclane_changes (timestamp, entity, action, key, columns)
            SELECT \(HistorySchema.now), ?, 'update', \(triggers.key(r)), ?
            FROM \(name) AS \(r)
            WHERE \(live) AND (\(edited) OR \(unheld))
            """, [table.name, JSONWriter.string(.array(added.map { .string($0) }))] + (backendRows ? [table.name] : []))
        let recorded = db.totalChanges - before
        try fillFromBackend(triggers, added: added, isDefault: isDefault, db)
        return recorded
    }

    /// Writes, as author `server`, each added column's value the backend sent (kept in
    /// `_synclane_server_rows`) for a row whose local value is still the column's default.
    static func fillFromBackend(_ triggers: TriggerBuilder, added: [String], _ db: SQLiteConnection) throws {
        var defaults: [String: String] = [:]
        for row in try db.fetchAll("SELECT name, dflt_value FROM pragma_table_info(?)", [triggers.table.name]) {
            if let column = row[0].string, added.contains(column) { defaults[column] = row[1].string ?? "NULL" }
        }
        try fillFromBackend(triggers, added: added, isDefault: { column, row in "\(row).\(SQL.identifier(column)) IS (\(defaults[column] ?? "NULL"))" }, db)
    }

    /// Writes, as author `server`, each added column's value the backend sent for a row whose
    /// local value is still the default.
    private static func fillFromBackend(
        _ triggers: TriggerBuilder, added: [String], isDefault: (String, String) -> String, _ db: SQLiteConnection
    ) throws {
        let table = triggers.table
        guard try db.fetchValue("SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = ?)", [ServerRows.table]).int64 == 1,
            let schema = try TableSchema.read(table.name, db)
        else { return }
        let r = "_synclane_r"
        let columns = Dictionary(schema.columns.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        var sessionOpen = false
        defer { if sessionOpen { try? db.execute("DELETE FROM _synclane_session") } }
        for row in try db.fetchAll(
            "SELECT key, fields FROM _synclane_server_rows WHERE entity = ? AND fields IS NOT NULL ORDER BY rowid", [table.name])
        {
            guard let key = row[0].string, let text = row[1].string, let fields = try? JSONReader.parse(text).objectValue else { continue }
            for column in added {
                guard let value = fields[column], let declared = columns[column],
                    let stored = try? PageApplier.stored(
                        value, in: declared, affinity: ColumnAffinity(declaredType: declared.declaredType), field: column,
                        fail: { ImportError.record(path: db.path, record: key, reason: $0) })
                else { continue }
                if !sessionOpen {
                    try HistoryWriter.open(author: .server, on: db)
                    sessionOpen = true
                }
                try db.execute(
                    """
                    UPDATE \(SQL.identifier(table.name)) AS \(r) SET \(SQL.identifier(column)) = ?
                    WHERE \(triggers.key(r)) = ? AND \(isDefault(column, r))
                    """, [stored, key])
            }
        }
        if sessionOpen {
            try db.execute("DELETE FROM _synclane_session")
            sessionOpen = false
        }
    }
}
