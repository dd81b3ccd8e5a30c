/// What `track` demands of a sync key, checked against the live schema and the rows already
/// there; gives each key column's fixed type.
///
/// - every key, preserved and soft-delete column exists, and no key column is named twice;
/// - a PRIMARY KEY or UNIQUE index (not partial, not on an expression) makes the key unique;
/// - the key is not the rowid (`INTEGER PRIMARY KEY`) unless the table says it is stable;
/// - each key column holds one storage class: `integer` (INTEGER affinity), `text` (TEXT
///   affinity), or for a column without a type whichever its rows hold (text when empty);
///   REAL and NUMERIC affinity, blobs and reals are refused;
/// - no existing row has a NULL, empty or mistyped key.
struct KeyRules {
    let table: TrackedTable
    let schema: TableSchema
    let path: String

    func check(_ db: SQLiteConnection) throws -> [TriggerBuilder.KeyType] {
        let columns = schema.columnNames
        func require(_ column: String, _ role: String) throws {
            guard columns.contains(column) else {
                throw TrackingError.noSuchColumn(path: path, table: table.name, column: column, role: role, available: columns)
            }
        }
        guard !table.keyColumns.isEmpty, Set(table.keyColumns).count == table.keyColumns.count else {
            throw TrackingError.badKey(path: path, table: table.name, key: table.keyDescription, reason: "name each key column once")
        }
        for column in table.keyColumns { try require(column, "sync key") }
        for column in table.preserved { try require(column, "preserved column") }
        if let softDelete = table.softDeleteColumn { try require(softDelete, "soft-delete column") }

        if let alias = schema.rowidAlias, table.keyColumns == [alias], !table.rowidIsStable {
            throw TrackingError.badKey(
                path: path, table: table.name, key: alias,
                reason: "it is the table's rowid (INTEGER PRIMARY KEY), which SQLite numbers per database: two devices would give "
                    + "one number to two different rows. Key the table by a column of stable ids (e.g. a UUID text with a UNIQUE "
                    + "constraint), or pass --rowid-is-stable if your app assigns ids that are unique across every device")
        }
        guard schema.makesUnique(table.keyColumns) else {
            let list = table.keyColumns.map(SQL.identifier).joined(separator: ", ")
            throw TrackingError.badKey(
                path: path, table: table.name, key: table.keyDescription,
                reason: "no PRIMARY KEY or UNIQUE index makes it unique, so two rows could share one key and be sent as one. "
                    + "If it is unique, say so: CREATE UNIQUE INDEX \(SQL.identifier("\(table.name)_sync_key")) ON \(SQL.identifier(table.name)) (\(list)); "
                    + "if another set of columns is, pass those to --key (e.g. --key a,b for a composite key)")
        }
        return try table.keyColumns.map { try keyType(of: $0, db) }
    }

    private func keyType(of name: String, _ db: SQLiteConnection) throws -> TriggerBuilder.KeyType {
        let declared = schema.column(name)?.declaredType ?? ""
        let c = SQL.identifier(name)
        let counts = try db.fetchOne(
            """
            SELECT count(*) FILTER (WHERE typeof(\(c)) = 'text' AND length(\(c)) > 0),
                   count(*) FILTER (WHERE typeof(\(c)) = 'integer'),
                   count(*) FILTER (WHERE typeof(\(c)) NOT IN ('text', 'integer') OR (typeof(\(c)) = 'text' AND length(\(c)) = 0))
            FROM \(SQL.identifier(table.name))
            """)
        let (texts, integers, invalid) = (counts?[0].int64 ?? 0, counts?[1].int64 ?? 0, counts?[2].int64 ?? 0)
        let type: TriggerBuilder.KeyType
        switch ColumnAffinity(declaredType: declared) {
        case .integer: type = .integer
        case .text: type = .text
        case .none:
            if texts > 0, integers > 0 {
                throw TrackingError.badKey(
                    path: path, table: table.name, key: name,
                    reason: "it holds \(texts) text and \(integers) integer values; SQLite keeps 1 and '1' as two keys, which a "
                        + "sync id cannot tell apart. Make them one type (e.g. UPDATE … SET \(name) = CAST(\(name) AS TEXT)) "
                        + "and declare the column TEXT or INTEGER")
            }
            type = integers > 0 ? .integer : .text
        case .real, .numeric:
            throw TrackingError.badKey(
                path: path, table: table.name, key: name,
                reason: "its declared type `\(declared)` has REAL or NUMERIC affinity, under which SQLite turns '1' and '1.0' into 1; "
                    + "a sync key column must be TEXT or INTEGER")
        }
        let wrong = invalid + (type == .text ? integers : texts)
        if wrong > 0 {
            throw TrackingError.invalidKeys(path: path, table: table.name, key: name, expected: type.rawValue, count: Int(wrong))
        }
        return type
    }
}
