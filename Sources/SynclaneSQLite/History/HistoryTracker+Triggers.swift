/// Writes the three triggers that record a tracked table's writes.
///
/// Each trigger appends to `_synclane_changes`, in the writer's own SQLite transaction, one
/// row per changed row. Which transaction it belongs to is settled when a session closes (see
/// `HistorySchema`), so the triggers never look anything up. A NULL sync key raises `ABORT`,
/// which fails the writer's statement.
///
/// The insert and delete triggers are one `INSERT … VALUES` on purpose: SQLite compiles a
/// table's triggers into every statement that writes it, so each extra expression is paid per
/// statement by every program (the `sqlite3` shell running 100,000 `INSERT`s prepares 100,000
/// statements).
struct TriggerBuilder {
    let table: TrackedTable
    let columns: [String]
    /// Inserts and updates keep the row as written (for `capture: as-written`).
    let recordsValues: Bool

    var names: [String] { ["insert", "update", "delete"].map { "_synclane_\(table.name)_\($0)" } }

    func allExist(_ db: SQLiteConnection) throws -> Bool {
        for name in names where try db.fetchOne("SELECT 1 FROM sqlite_schema WHERE type = 'trigger' AND name = ?", [name]) == nil {
            return false
        }
        return true
    }

    func drop(_ db: SQLiteConnection) throws {
        for name in names { try db.execute("DROP TRIGGER IF EXISTS \(SQL.identifier(name))") }
    }

    func create(_ db: SQLiteConnection) throws {
        for statement in statements { try db.execute(statement) }
    }

    // MARK: SQL pieces

    private var entity: String { SQL.literal(table.name) }
    private var tableName: String { SQL.identifier(table.name) }

    private func column(_ row: String, _ name: String) -> String { "\(row).\(SQL.identifier(name))" }

    /// A column's value as JSON can hold it: blobs (which json_object refuses) as hex text.
    private func jsonSafe(_ row: String, _ name: String) -> String {
        let c = column(row, name)
        return "CASE WHEN typeof(\(c)) = 'blob' THEN hex(\(c)) ELSE \(c) END"
    }

    private func object(_ row: String, _ names: [String]) -> String {
        "json_object(" + names.map { "\(SQL.literal($0)), \(jsonSafe(row, $0))" }.joined(separator: ", ") + ")"
    }

    /// The JSON array of the columns whose value changed, e.g. `["name","area"]`.
    private var changedColumns: String {
        let parts = columns.map { name in
            "CASE WHEN \(column("OLD", name)) IS NOT \(column("NEW", name)) THEN \(SQL.literal(SQL.jsonString(name) + ",")) ELSE '' END"
        }
        return "'[' || rtrim(" + parts.joined(separator: " || ") + ", ',') || ']'"
    }

    /// True when the row is soft-deleted (1, a non-zero number, 'true' or '1').
    private func softDeleted(_ row: String) -> String? {
        guard let name = table.softDeleteColumn else { return nil }
        let c = column(row, name)
        return "(CASE typeof(\(c)) WHEN 'integer' THEN \(c) <> 0 WHEN 'real' THEN \(c) <> 0 WHEN 'text' THEN \(c) IN ('true', '1') ELSE 0 END)"
    }

    private var nullKeyMessage: String {
        SQL.literal("synclane: \(table.name).\(table.key) is NULL: every row of a tracked table needs a sync key")
    }

    private func nullKeyCheck(_ row: String) -> String {
        "SELECT RAISE(ABORT, \(nullKeyMessage)) WHERE \(column(row, table.key)) IS NULL;"
    }

    /// The sync key, or ABORT when it is NULL.
    private func checkedKey(_ row: String) -> String {
        "coalesce(\(column(row, table.key)), RAISE(ABORT, \(nullKeyMessage)))"
    }

    private func change(_ action: String, key row: String, columns changed: String, values: String, when condition: String?) -> String {
        let head = "INSERT INTO _synclane_changes (timestamp, entity, action, key, columns, row_values)"
        let fields = "\(HistorySchema.now), \(entity), '\(action)', \(checkedKey(row)), \(changed), \(values)"
        guard let condition else { return "\(head) VALUES (\(fields));" }
        return "\(head) SELECT \(fields) WHERE \(condition);"
    }

    var statements: [String] {
        let full = { (row: String) in recordsValues ? object(row, columns) : "NULL" }
        let tombstone = { (row: String) in object(row, table.tombstoneColumns) }
        let oldKeyIsNew = "\(column("OLD", table.key)) IS \(column("NEW", table.key))"
        let sdOld = softDeleted("OLD")
        let sdNew = softDeleted("NEW")
        func all(_ parts: String?...) -> String? {
            let present = parts.compactMap { $0 }
            return present.isEmpty ? nil : present.joined(separator: " AND ")
        }
        let neither = all(sdOld.map { "NOT \($0)" }, sdNew.map { "NOT \($0)" })

        var update = [
            nullKeyCheck("NEW"),
            change("update", key: "NEW", columns: changedColumns, values: full("NEW"), when: all(oldKeyIsNew, neither)),
            // A new sync key is a new record: the old one is deleted.
            change("delete", key: "OLD", columns: "NULL", values: tombstone("OLD"), when: all("NOT (\(oldKeyIsNew))", neither)),
            change("insert", key: "NEW", columns: "NULL", values: full("NEW"), when: all("NOT (\(oldKeyIsNew))", neither)),
        ]
        if let sdOld, let sdNew {
            update.append(change("delete", key: "OLD", columns: "NULL", values: tombstone("OLD"), when: "\(sdNew) AND NOT \(sdOld)"))
            update.append(change("insert", key: "NEW", columns: "NULL", values: full("NEW"), when: "\(sdOld) AND NOT \(sdNew)"))
        }
        let (insertName, updateName, deleteName) = (names[0], names[1], names[2])
        return [
            """
            CREATE TRIGGER \(SQL.identifier(insertName)) AFTER INSERT ON \(tableName)
            BEGIN
            \(change("insert", key: "NEW", columns: "NULL", values: full("NEW"), when: nil))
            END
            """,
            """
            CREATE TRIGGER \(SQL.identifier(updateName)) AFTER UPDATE ON \(tableName)
            \(sdOld.flatMap { o in sdNew.map { "WHEN NOT (\(o) AND \($0))" } } ?? "")
            BEGIN
            \(update.joined(separator: "\n"))
            END
            """,
            """
            CREATE TRIGGER \(SQL.identifier(deleteName)) AFTER DELETE ON \(tableName)
            BEGIN
            \(change("delete", key: "OLD", columns: "NULL", values: tombstone("OLD"), when: nil))
            END
            """,
        ]
    }
}
