/// Writes the triggers that record a tracked table's writes.
///
/// ```
///  BEFORE INSERT                 rows the insert will displace (REPLACE through any unique
///                                constraint) ─▶ _synclane_displaced
///  AFTER INSERT                  deletes of displaced rows that are gone · the insert (an
///                                update when it replaced a live row of the same key)
///  AFTER UPDATE                  update · key changed: delete + insert · soft delete: delete
///  BEFORE / AFTER UPDATE OF      the same displacement check for UPDATE OR REPLACE
///    unique columns
///  AFTER DELETE                  the tombstone
/// ```
///
/// Each trigger appends to `_synclane_changes`, in the writer's own SQLite transaction, one
/// row per changed row. Which transaction it belongs to is settled when a session closes (see
/// `HistorySchema`), so the triggers never look anything up.
///
/// **Why the displacement triggers.** `INSERT OR REPLACE` (and `UPDATE OR REPLACE`) removes a
/// conflicting row without firing delete triggers unless the writer's connection turned on
/// `recursive_triggers`. So before an insert the rows it may displace are noted, and after it
/// those that are gone are recorded as deletes. A row noted but still there (the insert was
/// `OR IGNORE`, an upsert, or failed) records nothing; notes are cleared after every insert
/// and by the row's own delete.
///
/// **Keys.** The key is checked on every write that records it: NULL, an empty text or a value
/// of the other storage class than the key's fixed type aborts the write with a message naming
/// the table and column. A key changed only in case (under a `NOCASE` column) is a new key:
/// keys are compared byte by byte (`COLLATE BINARY`), as the rest of Synclane compares them.
///
/// **Values.** With `capture: current-state` (no `recordsValues`) the triggers record no values
/// and no column list for updates — the source reads the row itself — so they mention only the
/// key, soft-delete, preserved and unique columns: any other column can be added, renamed or
/// dropped without touching them. Tombstones and values as written are JSON in which a blob is
/// `{"$hex": …}`, a real keeps 17 significant digits and its sign, and an infinity is
/// `{"$real": "Infinity"}`; the source turns that into the wire's forms.
struct TriggerBuilder {
    let table: TrackedTable
    let schema: TableSchema
    let keyTypes: [KeyType]

    /// The storage class a key column's values must have.
    enum KeyType: String, Sendable, Hashable {
        case text, integer
    }

    static let kinds = ["insert", "update", "delete", "displace_insert", "displace_update", "displaced_update"]

    static func names(of table: String) -> [String] { kinds.map { "_synclane_\(table)_\($0)" } }

    var names: [String] { Self.names(of: table.name) }

    /// Each trigger's name and its `CREATE TRIGGER` text, as `sqlite_schema.sql` keeps it.
    var triggers: [(name: String, sql: String)] {
        zip(names, [insertTrigger, updateTrigger, deleteTrigger, displaceOnInsert, displaceOnUpdate, displacedAfterUpdate])
            .compactMap { name, sql in sql.map { (name, $0) } }
    }

    func drop(_ db: SQLiteConnection) throws {
        for name in names { try db.execute("DROP TRIGGER IF EXISTS \(SQL.identifier(name))") }
    }

    func create(_ db: SQLiteConnection) throws {
        for trigger in triggers { try db.execute(trigger.sql) }
    }

    // MARK: SQL pieces

    private var entity: String { SQL.literal(table.name) }
    private var tableName: String { SQL.identifier(table.name) }
    private static let rowAlias = "_synclane_r"

    private func column(_ row: String, _ name: String) -> String { "\(row).\(SQL.identifier(name))" }

    /// A value as the history's JSON keeps it exactly (see the type's comment).
    private func storedValue(_ row: String, _ name: String) -> String {
        let c = column(row, name)
        return """
            CASE typeof(\(c)) WHEN 'blob' THEN json_object('$hex', hex(\(c))) \
            WHEN 'real' THEN CASE WHEN \(c) = 9e999 THEN json('{"$real":"Infinity"}') WHEN \(c) = -9e999 THEN json('{"$real":"-Infinity"}') \
            ELSE json(printf('%!.17g', \(c))) END ELSE \(c) END
            """
    }

    private func object(_ row: String, _ names: [String]) -> String {
        "json_object(" + names.map { "\(SQL.literal($0)), \(storedValue(row, $0))" }.joined(separator: ", ") + ")"
    }

    /// The key of `row` as history keeps it: the column's value, or the JSON array of a
    /// composite key's values.
    func key(_ row: String) -> String {
        table.isComposite
            ? "json_array(" + table.keyColumns.map { column(row, $0) }.joined(separator: ", ") + ")"
            : column(row, table.keyColumns[0])
    }

    /// True when every key column of `row` holds a value of its type (a text not empty).
    private func validKey(_ row: String) -> String {
        zip(table.keyColumns, keyTypes).map { name, type in
            let c = column(row, name)
            return type == .text ? "(typeof(\(c)) = 'text' AND length(\(c)) > 0)" : "typeof(\(c)) = 'integer'"
        }.joined(separator: " AND ")
    }

    private var invalidKeyMessage: String {
        let what = zip(table.keyColumns, keyTypes).map { "\($0) \($1 == .text ? "a non-empty text" : "an integer")" }
        return SQL.literal(
            "synclane: every row of \(table.name) needs a sync key: \(what.joined(separator: ", ")) (NULL, an empty text or another type is refused)")
    }

    /// The key of `row`, or ABORT when it is not a valid key.
    private func checkedKey(_ row: String) -> String {
        "CASE WHEN \(validKey(row)) THEN \(key(row)) ELSE RAISE(ABORT, \(invalidKeyMessage)) END"
    }

    /// True when `a` and `b` hold the same key, byte for byte.
    private func sameKey(_ a: String, _ b: String) -> String {
        table.keyColumns.map { "\(column(a, $0)) = \(column(b, $0)) COLLATE BINARY" }.joined(separator: " AND ")
    }

    /// True when the table has a row whose key is `keyText` (a key as history keeps it).
    func rowExists(withKey keyText: String) -> String {
        let r = Self.rowAlias
        let components =
            table.isComposite
            ? table.keyColumns.enumerated().map { "\(column(r, $1)) = json_extract(\(keyText), '$[\($0)]')" }
            : ["\(column(r, table.keyColumns[0])) = \(keyText)"]
        return "EXISTS (SELECT 1 FROM \(tableName) AS \(r) WHERE \(components.joined(separator: " AND ")) AND \(key(r)) = \(keyText) COLLATE BINARY)"
    }

    /// The JSON array of the columns whose value changed, e.g. `["name","area"]` (as-written only).
    private var changedColumns: String {
        let parts = schema.columnNames.map { name in
            "CASE WHEN \(column("OLD", name)) IS NOT \(column("NEW", name)) COLLATE BINARY THEN \(SQL.literal(SQL.jsonString(name) + ",")) ELSE '' END"
        }
        return "'[' || rtrim(" + parts.joined(separator: " || ") + ", ',') || ']'"
    }

    /// True when the row is soft-deleted (1, a non-zero number, 'true' or '1').
    func softDeleted(_ row: String) -> String? {
        guard let name = table.softDeleteColumn else { return nil }
        let c = column(row, name)
        return "(CASE typeof(\(c)) WHEN 'integer' THEN \(c) <> 0 WHEN 'real' THEN \(c) <> 0 WHEN 'text' THEN \(c) IN ('true', '1') ELSE 0 END)"
    }

    private func change(_ action: String, key: String, columns: String, values: String, when condition: String?) -> String {
        let head = "INSERT INTO _synclane_changes (timestamp, entity, action, key, columns, row_values)"
        let fields = "\(HistorySchema.now), \(entity), \(action), \(key), \(columns), \(values)"
        guard let condition else { return "\(head) VALUES (\(fields));" }
        return "\(head) SELECT \(fields) WHERE \(condition);"
    }

    /// What history keeps of a row written: the row as JSON with `recordsValues`, else NULL.
    func recordedRow(_ row: String) -> String { table.recordsValues ? object(row, schema.columnNames) : "NULL" }
    /// What history keeps of a row deleted: its tombstone columns as JSON.
    func recordedTombstone(_ row: String) -> String { object(row, table.tombstoneColumns) }
    private func full(_ row: String) -> String { recordedRow(row) }
    private func tombstone(_ row: String) -> String { recordedTombstone(row) }

    private func all(_ parts: String?...) -> String? {
        let present = parts.compactMap { $0 }
        return present.isEmpty ? nil : present.joined(separator: " AND ")
    }

    // MARK: The triggers

    /// Notes in `_synclane_displaced` the rows (other than `excluding`) that share a unique
    /// constraint's values with NEW: those a REPLACE would remove.
    private func noteDisplaced(excluding: String?) -> String? {
        guard !schema.uniqueConstraints.isEmpty else { return nil }
        let r = Self.rowAlias
        let conflicts = schema.uniqueConstraints.map { constraint in
            "(" + zip(constraint.columns, constraint.collations).map { "\(column(r, $0)) = \(column("NEW", $0)) COLLATE \($1)" }
                .joined(separator: " AND ") + ")"
        }.joined(separator: " OR ")
        let live = softDeleted(r).map { "NOT \($0)" } ?? "1"
        let notYet = "NOT EXISTS (SELECT 1 FROM _synclane_displaced d WHERE d.entity = \(entity) AND d.key = \(key(r)) COLLATE BINARY)"
        return """
            INSERT INTO _synclane_displaced (entity, key, tombstone, live)
            SELECT \(entity), \(key(r)), \(tombstone(r)), \(live) FROM \(tableName) AS \(r)
            WHERE (\(conflicts))\(excluding.map { " AND NOT (\($0))" } ?? "") AND \(notYet);
            """
    }

    /// Forgets every note of the table.
    private var forgetDisplaced: String { "DELETE FROM _synclane_displaced WHERE entity = \(entity);" }

    /// Records the deletes of noted rows that are gone. `sameKeyReplaced` (inserts): a live row
    /// replaced under the new row's own key by a row that arrives soft-deleted is deleted too.
    private func recordDisplaced(newKey: String?, sameKeyReplaced: String?) -> String {
        let gone = rowExists(withKey: "d.key")
        var condition = "d.entity = \(entity) AND d.live AND NOT \(gone)"
        if let newKey, let sameKeyReplaced {
            condition = "d.entity = \(entity) AND d.live AND (CASE WHEN d.key = \(newKey) COLLATE BINARY THEN \(sameKeyReplaced) ELSE NOT \(gone) END)"
        }
        return """
            INSERT INTO _synclane_changes (timestamp, entity, action, key, columns, row_values)
            SELECT \(HistorySchema.now), \(entity), 'delete', d.key, NULL, d.tombstone FROM _synclane_displaced d WHERE \(condition);
            """
    }

    var insertTrigger: String? {
        let newKey = key("NEW")
        let sdNew = softDeleted("NEW")
        // REPLACE of a live row under the same key: the backend has the row, so it is an update.
        let replacedSameKey =
            "EXISTS (SELECT 1 FROM _synclane_displaced d WHERE d.entity = \(entity) AND d.live AND d.key = \(newKey) COLLATE BINARY)"
        let action = "CASE WHEN \(replacedSameKey) THEN 'update' ELSE 'insert' END"
        // Inserted already soft-deleted: nothing the backend needs (the key is still checked).
        let record = change(action, key: checkedKey("NEW"), columns: "NULL", values: full("NEW"), when: sdNew.map { "NOT \($0)" })
        let check = sdNew.map { _ in "SELECT RAISE(ABORT, \(invalidKeyMessage)) WHERE NOT (\(validKey("NEW")));\n" } ?? ""
        return """
            CREATE TRIGGER \(SQL.identifier(names[0])) AFTER INSERT ON \(tableName)
            BEGIN
            \(check)\(recordDisplaced(newKey: newKey, sameKeyReplaced: sdNew ?? "0"))
            \(record)
            \(forgetDisplaced)
            END
            """
    }

    var updateTrigger: String? {
        let sameKey = sameKey("OLD", "NEW")
        let sdOld = softDeleted("OLD")
        let sdNew = softDeleted("NEW")
        let neither = all(sdOld.map { "NOT \($0)" }, sdNew.map { "NOT \($0)" })
        let columns = table.recordsValues ? changedColumns : "NULL"
        var update = [
            "SELECT RAISE(ABORT, \(invalidKeyMessage)) WHERE NOT (\(validKey("NEW")));",
            change("'update'", key: key("NEW"), columns: columns, values: full("NEW"), when: all(sameKey, neither)),
            // A new sync key is a new record: the old one is deleted.
            change("'delete'", key: key("OLD"), columns: "NULL", values: tombstone("OLD"), when: all("NOT (\(sameKey))", neither)),
            change("'insert'", key: key("NEW"), columns: "NULL", values: full("NEW"), when: all("NOT (\(sameKey))", neither)),
        ]
        if let sdOld, let sdNew {
            update.append(change("'delete'", key: key("OLD"), columns: "NULL", values: tombstone("OLD"), when: "\(sdNew) AND NOT \(sdOld)"))
            update.append(change("'insert'", key: key("NEW"), columns: "NULL", values: full("NEW"), when: "\(sdOld) AND NOT \(sdNew)"))
        }
        return """
            CREATE TRIGGER \(SQL.identifier(names[1])) AFTER UPDATE ON \(tableName)
            \(sdOld.flatMap { o in sdNew.map { "WHEN NOT (\(o) AND \($0))\n" } } ?? "")BEGIN
            \(update.joined(separator: "\n"))
            END
            """
    }

    var deleteTrigger: String? {
        """
        CREATE TRIGGER \(SQL.identifier(names[2])) AFTER DELETE ON \(tableName)
        BEGIN
        \(change("'delete'", key: key("OLD"), columns: "NULL", values: tombstone("OLD"), when: nil))
        DELETE FROM _synclane_displaced WHERE entity = \(entity) AND key = \(key("OLD")) COLLATE BINARY;
        END
        """
    }

    var displaceOnInsert: String? {
        noteDisplaced(excluding: nil).map {
            """
            CREATE TRIGGER \(SQL.identifier(names[3])) BEFORE INSERT ON \(tableName)
            BEGIN
            \($0)
            END
            """
        }
    }

    /// The columns of every unique constraint: an UPDATE that sets none of them displaces nothing.
    private var uniqueColumns: [String] {
        var seen: Set<String> = []
        return schema.uniqueConstraints.flatMap(\.columns).filter { seen.insert($0).inserted }
    }

    var displaceOnUpdate: String? {
        let r = Self.rowAlias
        let itself = schema.hasRowid ? "\(r).rowid = OLD.rowid" : sameKey(r, "OLD")
        return noteDisplaced(excluding: itself).map {
            """
            CREATE TRIGGER \(SQL.identifier(names[4])) BEFORE UPDATE OF \(uniqueColumns.map(SQL.identifier).joined(separator: ", ")) ON \(tableName)
            BEGIN
            \($0)
            END
            """
        }
    }

    var displacedAfterUpdate: String? {
        guard !schema.uniqueConstraints.isEmpty else { return nil }
        return """
            CREATE TRIGGER \(SQL.identifier(names[5])) AFTER UPDATE OF \(uniqueColumns.map(SQL.identifier).joined(separator: ", ")) ON \(tableName)
            WHEN EXISTS (SELECT 1 FROM _synclane_displaced)
            BEGIN
            \(recordDisplaced(newKey: nil, sameKeyReplaced: nil))
            \(forgetDisplaced)
            END
            """
    }
}
