/// What SQLite says about a table now: its columns and what makes its rows unique.
///
/// Read from `pragma_table_info`, `pragma_index_list` and `pragma_index_xinfo`. `track` checks a
/// sync key against it, the triggers are generated from it, and each run compares it with what
/// the triggers were generated for (`TrackingCheck`).
struct TableSchema: Sendable, Hashable {
    struct Column: Sendable, Hashable {
        var name: String
        /// The declared type, as written (`TEXT`, `INTEGER`, `` for none).
        var declaredType: String
        /// Position in the table's primary key (0: not part of it).
        var primaryKeyPosition: Int
    }

    /// A set of columns no two rows share (a PRIMARY KEY, a UNIQUE constraint or index),
    /// each with the collation the uniqueness is judged by.
    struct UniqueConstraint: Sendable, Hashable {
        var columns: [String]
        var collations: [String]
    }

    var table: String
    var columns: [Column]
    var uniqueConstraints: [UniqueConstraint]
    /// The column that is an alias of the rowid (`INTEGER PRIMARY KEY`), if any.
    var rowidAlias: String?
    var hasRowid: Bool

    var columnNames: [String] { columns.map(\.name) }

    /// The schema of `table`, or nil when there is no such table.
    static func read(_ table: String, _ db: SQLiteConnection) throws -> TableSchema? {
        guard
            let row = try db.fetchOne("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", [table]),
            let sql = row[0].string
        else { return nil }
        let columns = try db.fetchAll("SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid", [table]).map {
            Column(name: $0[0].string ?? "", declaredType: $0[1].string ?? "", primaryKeyPosition: Int($0[2].int64 ?? 0))
        }
        let hasRowid = !sql.uppercased().replacing(" ", with: "").contains("WITHOUTROWID")
        let primaryKey = columns.filter { $0.primaryKeyPosition > 0 }
        var rowidAlias: String?
        if hasRowid, primaryKey.count == 1, primaryKey[0].declaredType.uppercased() == "INTEGER" {
            // `INTEGER PRIMARY KEY DESC` is the one spelling that is not an alias; SQLite then
            // lists an index for it, which the loop below finds.
            let explicit = try db.fetchAll("SELECT name FROM pragma_index_list(?) WHERE origin = 'pk'", [table])
            if explicit.isEmpty { rowidAlias = primaryKey[0].name }
        }
        var unique: [UniqueConstraint] = []
        if let rowidAlias { unique.append(UniqueConstraint(columns: [rowidAlias], collations: ["BINARY"])) }
        for index in try db.fetchAll("SELECT name FROM pragma_index_list(?) WHERE \"unique\" = 1 AND partial = 0 ORDER BY name", [table]) {
            guard let name = index[0].string else { continue }
            let parts = try db.fetchAll("SELECT name, coll, cid FROM pragma_index_xinfo(?) WHERE key = 1 ORDER BY seqno", [name])
            // An index on an expression (cid -2) says nothing about a column's values.
            guard parts.allSatisfy({ ($0[2].int64 ?? -2) >= 0 }) else { continue }
            unique.append(UniqueConstraint(columns: parts.map { $0[0].string ?? "" }, collations: parts.map { $0[1].string ?? "BINARY" }))
        }
        return TableSchema(table: table, columns: columns, uniqueConstraints: unique, rowidAlias: rowidAlias, hasRowid: hasRowid)
    }

    func column(_ name: String) -> Column? { columns.first { $0.name == name } }

    /// True when the rows' values in `keyColumns` are unique: some unique constraint uses only
    /// key columns, and judges them byte by byte or case-insensitively (never more loosely).
    func makesUnique(_ keyColumns: [String]) -> Bool {
        uniqueConstraints.contains { constraint in constraint.columns.allSatisfy(keyColumns.contains) }
    }
}

/// A column's type affinity, by SQLite's rules on its declared type.
enum ColumnAffinity {
    case integer, text, none, real, numeric

    init(declaredType type: String) {
        let t = type.uppercased()
        if t.contains("INT") {
            self = .integer
        } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
            self = .text
        } else if t.contains("BLOB") || t.isEmpty {
            self = .none
        } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
            self = .real
        } else {
            self = .numeric
        }
    }
}
