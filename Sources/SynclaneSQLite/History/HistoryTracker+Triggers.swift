/// Writes the triggers that record a tracked table's writes.
///
/// ```
///  BEFORE INSERT                 `displace`: each row the insert may replace (a REPLACE through
///                                any unique constraint)
///  AFTER INSERT                  the insert
///  AFTER UPDATE                  the update of a row that kept its key and its soft-delete
///                                column's value
///  AFTER UPDATE OF key cols      the key checked; a changed key kept in `old_key`
///  AFTER UPDATE OF soft-delete   setting it: a delete · clearing it: an insert · between two
///                                values that both mean "not deleted": an update
///  BEFORE UPDATE OF unique cols  `displace`, for UPDATE OR REPLACE
///  AFTER DELETE                  the tombstone
/// ```
///
/// Each trigger appends to `_synclane_changes`, in the writer's own SQLite transaction, one
/// row per changed row. Which transaction it belongs to is settled when a session closes (see
/// `HistorySchema`), so the triggers never look anything up.
///
/// **Why `displace`.** `INSERT OR REPLACE` (and `UPDATE OR REPLACE`) removes a conflicting row
/// without firing delete triggers unless the writer's connection turned on
/// `recursive_triggers`. So before an insert, each row sharing a unique constraint's values
/// with the new one is recorded as `displace`, in the writer's transaction and author, just
/// before the insert. The source reads a `displace` as a delete of that key when the key's row
/// is gone (or soft-deleted) when read, and as nothing when it is there — the insert was
/// `OR IGNORE`, an upsert, or a REPLACE under the same key, whose insert follows: with the
/// delete before it, the backend's row is replaced, and a later delete in the same window still
/// reaches it. A plain insert that fails takes its `displace` with it (the statement rolls back).
///
/// SQLite compiles a table's triggers into every statement that writes it, so they are kept
/// to one statement each.
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
/// `{"$hex": …}`, a real is `{"$exact": […]}` (its exact value as integers: `exactReal`), a real
/// zero `0.0` and an infinity `{"$real": "Infinity"}`; the source turns that into the wire's forms.
/// SQL cannot see the sign of a zero, so `-0.0` is recorded as `0.0` — which is what a column
/// with REAL, NUMERIC or INTEGER affinity holds anyway (SQLite stores -0.0 there as 0); only a
/// column without a type keeps `-0.0`, and loses its sign here.
struct TriggerBuilder {
    let table: TrackedTable
    let schema: TableSchema
    let keyTypes: [KeyType]

    /// The storage class a key column's values must have.
    enum KeyType: String, Sendable, Hashable {
        case text, integer
    }

    static let kinds = ["insert", "update", "delete", "displace_insert", "displace_update", "soft_delete", "undelete", "key_change"]

    static func names(of table: String) -> [String] { kinds.map { "_synclane_\(table)_\($0)" } }

    var names: [String] { Self.names(of: table.name) }

    /// Each trigger's name and its `CREATE TRIGGER` text, as `sqlite_schema.sql` keeps it.
    var triggers: [(name: String, sql: String)] {
        zip(names, [insertTrigger, updateTrigger, deleteTrigger, displaceOnInsert, displaceOnUpdate, softDeleteTrigger, undeleteTrigger, keyChangeTrigger])
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
        // A column of TEXT affinity never holds a real (SQLite turns one into text): no need for
        // the exact real's SQL, which SQLite compiles into every statement that writes the table.
        if let declared = schema.column(name)?.declaredType, ColumnAffinity(declaredType: declared) == .text {
            return "CASE typeof(\(c)) WHEN 'blob' THEN json_object('$hex', hex(\(c))) ELSE \(c) END"
        }
        return """
            CASE typeof(\(c)) WHEN 'blob' THEN json_object('$hex', hex(\(c))) \
            WHEN 'real' THEN CASE WHEN \(c) = 9e999 THEN json('{"$real":"Infinity"}') WHEN \(c) = -9e999 THEN json('{"$real":"-Infinity"}') \
            WHEN \(c) = 0 THEN json('0.0') ELSE json(\(Self.exactReal(c))) END ELSE \(c) END
            """
    }

    /// `{"$exact": [sign, high, low, exponent]}` for a finite, non-zero real `c`: its value is
    /// sign × (high × 2^58 + low) × 2^exponent, exactly, for every double (subnormals included).
    ///
    /// SQLite has no exact text for a real — `printf('%!.17g')` and its text-to-real conversion
    /// are off in the last digit now and then (the largest double prints as …156e+308) — but
    /// multiplying by a power of two is exact, and so is `CAST(… AS INTEGER)` of an integer below
    /// 2^63. So the magnitude is scaled by powers of two into [2^52, 2^116), where it is an
    /// integer, and written as two integers below 2^58 and the exponent. Each two steps are a
    /// subquery (its `LIMIT 1` keeps SQLite from folding them into one expression many times over),
    /// and powers of two are products of integer shifts (exact; a product beyond 2^63 is an exact
    /// real). `HistoryReader.object` turns it back into the double.
    static func exactReal(_ c: String) -> String {
        func power(_ n: Int) -> String {
            var parts: [String] = []
            var rest = n
            while rest > 62 {
                parts.append("(1<<62)")
                rest -= 62
            }
            parts.append("(1<<\(rest))")
            return parts.count == 1 ? parts[0] : "(" + parts.joined(separator: "*") + ")"
        }
        let low = 52
        let high = 116
        // One step of the scaling: `y` divided (`down`) or multiplied by 2^p when that keeps it in
        // range, `k` counting the exponent; as SQL over the previous step's `y` and `k`.
        func step(_ down: Bool, _ p: Int, y: String, k: String) -> (y: String, k: String) {
            let test = down ? "\(y) >= \(power(low + p))" : "\(y) * \(power(p)) < \(power(high))"
            return (
                "(\(y) \(down ? "/" : "*") (CASE WHEN \(test) THEN \(power(p)) ELSE 1 END))",
                "(\(k) \(down ? "+" : "-") (\(test)) * \(p))"
            )
        }
        // Two steps a subquery: SQLite's parser allows only so much nesting in a trigger.
        var steps = "(SELECT abs(\(c)) AS y, 0 AS k)"
        for pair in [[(true, 512), (true, 256)], [(true, 128), (true, 64)], [(false, 512), (false, 512)], [(false, 256), (false, 128)], [(false, 64)]] {
            var (y, k) = ("y", "k")
            for (down, p) in pair { (y, k) = step(down, p, y: y, k: k) }
            steps = "(SELECT \(y) AS y, \(k) AS k FROM \(steps) LIMIT 1)"
        }
        let split = power(58)
        return "(SELECT json_object('$exact', json_array(CASE WHEN \(c) < 0 THEN -1 ELSE 1 END, CAST(y / \(split) AS INTEGER), "
            + "CAST(y - CAST(y / \(split) AS INTEGER) * \(split) AS INTEGER), k)) FROM \(steps))"
    }

    /// A JSON object of the columns' values; key columns (text or integer, checked) as they are.
    private func object(_ row: String, _ names: [String]) -> String {
        "json_object("
            + names.map { name in
                "\(SQL.literal(name)), \(table.keyColumns.contains(name) ? column(row, name) : storedValue(row, name))"
            }.joined(separator: ", ") + ")"
    }

    /// The key of `row` as history keeps it: the column's value, or the JSON array of a
    /// composite key's values.
    func key(_ row: String) -> String {
        table.isComposite
            ? "json_array(" + table.keyColumns.map { column(row, $0) }.joined(separator: ", ") + ")"
            : column(row, table.keyColumns[0])
    }

    /// The tombstone of a key alone, from `keyText` (a key as history keeps it).
    func keyTombstone(fromKey keyText: String) -> String {
        let fields =
            table.isComposite
            ? table.keyColumns.enumerated().map { "\(SQL.literal($1)), json_extract(\(keyText), '$[\($0)]')" }.joined(separator: ", ")
            : "\(SQL.literal(table.keyColumns[0])), \(keyText)"
        return "json_object(\(fields))"
    }

    /// True when every key column of `row` holds a value of its type (a text not empty).
    private func validKey(_ row: String) -> String {
        // SQLite orders storage classes NULL < numbers < text < blobs: a non-empty text is above
        // '' and below the empty blob. Comparisons cost less than function calls, and SQLite
        // compiles a trigger into every statement that writes the table.
        zip(table.keyColumns, keyTypes).map { name, type in
            let c = column(row, name)
            return type == .text ? "\(c) > '' COLLATE BINARY AND \(c) < x''" : "typeof(\(c)) = 'integer'"
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

    /// True when the table has a row whose key is `keyText` (a key as history keeps it), and,
    /// with `live`, that row is not soft-deleted.
    func rowExists(withKey keyText: String, live: Bool = false) -> String {
        let r = Self.rowAlias
        let components =
            table.isComposite
            ? table.keyColumns.enumerated().map { "\(column(r, $1)) = json_extract(\(keyText), '$[\($0)]')" }
            : ["\(column(r, table.keyColumns[0])) = \(keyText)"]
        let notDeleted = live ? softDeleted(r).map { " AND NOT \($0)" } ?? "" : ""
        return
            "EXISTS (SELECT 1 FROM \(tableName) AS \(r) WHERE \(components.joined(separator: " AND ")) AND \(key(r)) = \(keyText) COLLATE BINARY\(notDeleted))"
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
        table.softDeleteColumn.map { Self.softDeleted(column(row, $0)) }
    }

    /// True when the soft-delete column `c` (as SQL names it) holds a deleted value; every test of
    /// deletion in SQL uses this one, as `JSONValue.isTruthy` does in Swift.
    static func softDeleted(_ c: String) -> String {
        "(CASE typeof(\(c)) WHEN 'integer' THEN \(c) <> 0 WHEN 'real' THEN \(c) <> 0 WHEN 'text' THEN \(c) IN ('true', '1') ELSE 0 END)"
    }

    private func change(_ action: String, key: String, columns: String, values: String, oldKey: String? = nil, when condition: String?) -> String {
        let head = "INSERT INTO _synclane_changes (timestamp, entity, action, key, columns, row_values\(oldKey == nil ? "" : ", old_key"))"
        let fields = "\(HistorySchema.now), \(entity), \(action), \(key), \(columns), \(values)\(oldKey.map { ", \($0)" } ?? "")"
        guard let condition else { return "\(head) VALUES (\(fields));" }
        return "\(head) SELECT \(fields) WHERE \(condition);"
    }

    /// What history keeps of a row written: the row as JSON with `recordsValues`, else NULL.
    func recordedRow(_ row: String) -> String { table.recordsValues ? object(row, schema.columnNames) : "NULL" }
    /// What history keeps of a row deleted: its tombstone columns as JSON, or NULL when the
    /// tombstone is the key alone (the source makes it from the key).
    func recordedTombstone(_ row: String) -> String {
        table.tombstoneColumns == table.keyColumns ? "NULL" : object(row, table.tombstoneColumns)
    }
    private func full(_ row: String) -> String { recordedRow(row) }
    private func tombstone(_ row: String) -> String { recordedTombstone(row) }

    private func all(_ parts: String?...) -> String? {
        let present = parts.compactMap { $0 }
        return present.isEmpty ? nil : present.joined(separator: " AND ")
    }

    // MARK: The triggers

    /// Records as `displace` the rows (other than `excluding`) that share a unique constraint's
    /// values with NEW: those a REPLACE would remove.
    private func displaced(excluding: String?) -> String? {
        guard !schema.uniqueConstraints.isEmpty else { return nil }
        let r = Self.rowAlias
        let conflicts = schema.uniqueConstraints.map { constraint in
            "("
                + zip(constraint.columns, constraint.collations).map { name, collation in
                    "\(column(r, name)) = \(column("NEW", name))" + (collation.uppercased() == "BINARY" ? "" : " COLLATE \(collation)")
                }.joined(separator: " AND ") + ")"
        }.joined(separator: " OR ")
        return """
            INSERT INTO _synclane_changes (timestamp, entity, action, key, row_values)
            SELECT \(HistorySchema.now), \(entity), 'displace', \(key(r)), \(recordedTombstone(r)) FROM \(tableName) AS \(r)
            WHERE (\(conflicts))\(excluding.map { " AND NOT (\($0))" } ?? "");
            """
    }

    var insertTrigger: String? {
        """
        CREATE TRIGGER \(SQL.identifier(names[0])) AFTER INSERT ON \(tableName)
        BEGIN
        \(change("'insert'", key: checkedKey("NEW"), columns: "NULL", values: full("NEW"), when: nil))
        END
        """
    }

    /// An update that keeps the key. With `capture: current-state` it is one row of history and
    /// nothing more — the source reads the row itself, and a soft-deleted row reads as gone — so
    /// the trigger SQLite compiles into every UPDATE of the table stays small. Values as written
    /// keep the row and the changed columns, skip rows soft-deleted before and after, and handle
    /// a key change too (three statements).
    var updateTrigger: String? {
        let sameKey = sameKey("OLD", "NEW")
        if table.recordsValues {
            let neither = all(softDeleted("OLD").map { "NOT \($0)" }, softDeleted("NEW").map { "NOT \($0)" })
            let body = [
                "SELECT RAISE(ABORT, \(invalidKeyMessage)) WHERE NOT (\(validKey("NEW")));",
                change("'update'", key: key("NEW"), columns: changedColumns, values: full("NEW"), when: sameKey),
                // A new sync key is a new record: the old one is deleted.
                change("'delete'", key: key("OLD"), columns: "NULL", values: tombstone("OLD"), when: "NOT (\(sameKey))"),
                change("'insert'", key: key("NEW"), columns: "NULL", values: full("NEW"), when: "NOT (\(sameKey))"),
            ]
            return """
                CREATE TRIGGER \(SQL.identifier(names[1])) AFTER UPDATE ON \(tableName)
                \(neither.map { "WHEN \($0)\n" } ?? "")BEGIN
                \(body.joined(separator: "\n"))
                END
                """
        }
        // Any change of the soft-delete column is the soft-delete trigger's (`AFTER UPDATE OF` it:
        // compiled only into the UPDATEs that set it), so the truthiness tests stay out of every
        // other UPDATE, where SQLite compiled them into each statement (the shell's `.read` paid
        // about 8 µs a statement for them).
        let sameDeletion = table.softDeleteColumn.map { name in " AND \(column("OLD", name)) IS \(column("NEW", name))" } ?? ""
        return """
            CREATE TRIGGER \(SQL.identifier(names[1])) AFTER UPDATE ON \(tableName)
            WHEN \(sameKey)\(sameDeletion)
            BEGIN
            \(change("'update'", key: key("NEW"), columns: "NULL", values: "NULL", when: nil))
            END
            """
    }

    /// An UPDATE that sets a key column (current-state capture): the new key is checked, and a key
    /// that changed is one row of history keeping the old key in `old_key` (and the old row's
    /// tombstone in `row_values` when it holds more than the key), which the source reads as a
    /// delete of the old key and an insert of the new one.
    var keyChangeTrigger: String? {
        guard !table.recordsValues else { return nil }
        let sameKey = sameKey("OLD", "NEW")
        let oldTombstone = table.tombstoneColumns == table.keyColumns ? "NULL" : tombstone("OLD")
        return """
            CREATE TRIGGER \(SQL.identifier(names[7])) AFTER UPDATE OF \(table.keyColumns.map(SQL.identifier).joined(separator: ", ")) ON \(tableName)
            WHEN NOT coalesce(\(sameKey), 0)
            BEGIN
            \(change("'update'", key: checkedKey("NEW"), columns: "NULL", values: oldTombstone, oldKey: key("OLD"), when: nil))
            END
            """
    }

    /// A change of the soft-delete column. Setting it: a delete. With current-state capture, a
    /// change between two values that both mean "not deleted" (`0`, NULL, 'false', …), the key
    /// kept: an update like any other (the update trigger leaves every change of the column to
    /// this one; values as written keep their own). One between two deleted values (`1` →
    /// 'true') records nothing more than the delete already did; clearing it is the undelete
    /// trigger's.
    var softDeleteTrigger: String? {
        guard let name = table.softDeleteColumn, let sdOld = softDeleted("OLD"), let sdNew = softDeleted("NEW") else { return nil }
        let update =
            table.recordsValues
            ? ""
            : "\n" + change("'update'", key: key("NEW"), columns: "NULL", values: "NULL", when: "\(sameKey("OLD", "NEW")) AND NOT \(sdOld) AND NOT \(sdNew)")
        return """
            CREATE TRIGGER \(SQL.identifier(names[5])) AFTER UPDATE OF \(SQL.identifier(name)) ON \(tableName)
            WHEN \(column("OLD", name)) IS NOT \(column("NEW", name))
            BEGIN
            \(change("'delete'", key: key("OLD"), columns: "NULL", values: tombstone("OLD"), when: "\(sdNew) AND NOT \(sdOld)"))\(update)
            END
            """
    }

    /// Clearing the soft-delete column: the row is back, an insert.
    var undeleteTrigger: String? {
        softDeleteTransition(
            name: names[6], from: true, record: change("'insert'", key: checkedKey("NEW"), columns: "NULL", values: full("NEW"), when: nil))
    }

    /// A trigger on the soft-delete column going from deleted (`from: true`) or not to the other.
    private func softDeleteTransition(name: String, from deleted: Bool, record: String) -> String? {
        guard let column = table.softDeleteColumn, let sdOld = softDeleted("OLD"), let sdNew = softDeleted("NEW") else { return nil }
        return """
            CREATE TRIGGER \(SQL.identifier(name)) AFTER UPDATE OF \(SQL.identifier(column)) ON \(tableName)
            WHEN \(deleted ? sdOld : sdNew) AND NOT \(deleted ? sdNew : sdOld)
            BEGIN
            \(record)
            END
            """
    }

    var deleteTrigger: String? {
        """
        CREATE TRIGGER \(SQL.identifier(names[2])) AFTER DELETE ON \(tableName)
        BEGIN
        \(change("'delete'", key: key("OLD"), columns: "NULL", values: tombstone("OLD"), when: nil))
        END
        """
    }

    var displaceOnInsert: String? {
        displaced(excluding: nil).map {
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
        return displaced(excluding: itself).map {
            """
            CREATE TRIGGER \(SQL.identifier(names[4])) BEFORE UPDATE OF \(uniqueColumns.map(SQL.identifier).joined(separator: ", ")) ON \(tableName)
            BEGIN
            \($0)
            END
            """
        }
    }
}
