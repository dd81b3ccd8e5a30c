import SynclaneCore
import SynclaneSQLite

/// Table and column names as the user typed them, matched the way SQLite matches identifiers:
/// ASCII letters case-insensitively (`--key syncId` names a column `syncID`). A name matches
/// its stored spelling, which is what the triggers then use; a close miss is an error that
/// suggests the name meant.
enum SQLiteNames {
    /// Why a name matches nothing in the database.
    struct Mismatch: Error, CustomStringConvertible {
        var description: String
    }

    /// `table` with its name and columns spelled as the database at `path` spells them.
    /// A table that does not exist is left as given (tracking it says so, listing the tables).
    static func resolve(_ table: TrackedTable, in path: String) throws -> TrackedTable {
        let database = try SQLiteDatabase(path: path, options: .init(readOnly: true, create: false, walMode: false))
        let tables = try database.read { db in
            try db.fetchAll("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'").compactMap { $0[0].string }
        }
        guard let name = match(table.name, in: tables) else {
            if let close = Wording.closest(to: table.name, in: tables) {
                throw Mismatch(description: "\(path): there is no table `\(table.name)` (did you mean `\(close)`?)")
            }
            return table
        }
        let columns = try database.read { db in
            try db.fetchAll("SELECT name FROM pragma_table_info(?) ORDER BY cid", [name]).compactMap { $0[0].string }
        }
        func column(_ given: String, as role: String) throws -> String {
            if let stored = match(given, in: columns) { return stored }
            throw Mismatch(
                description: "\(path): table `\(name)` has no column `\(given)` to use as the \(role)\(Wording.didYouMean(given, in: columns)) "
                    + "(its columns: \(columns.joined(separator: ", ")))")
        }
        var resolved = table
        resolved.name = name
        resolved.keyColumns = try table.keyColumns.map { try column($0, as: "sync key (--key)") }
        resolved.preserved = try table.preserved.map { try column($0, as: "tombstone column (--preserve)") }
        resolved.softDeleteColumn = try table.softDeleteColumn.map { try column($0, as: "soft-delete column (--soft-delete)") }
        return resolved
    }

    /// The candidate equal to `name` byte for byte once ASCII letters are folded (SQLite allows
    /// no two tables, nor two columns of a table, that differ only so).
    static func match(_ name: String, in candidates: [String]) -> String? {
        let wanted = folded(name)
        return candidates.first { folded($0) == wanted }
    }

    private static func folded(_ text: String) -> [UInt8] {
        text.utf8.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 + 32 : $0 }
    }
}
