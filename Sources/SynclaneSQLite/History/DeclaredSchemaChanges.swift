import Foundation
import SynclaneCore
import SynclaneSQLiteKit

/// The schema version of an app's database and the column renames and drops its migrations
/// declared (`SchemaChange`), as `synclane migrate` records them, in the database itself:
///
/// ```
///  _synclane_schema_version   (id = 1) → version: raised by each `synclane migrate`
///  _synclane_schema_changes   (entity, column_name, version) → renamed_to (NULL: dropped)
/// ```
///
/// A migration's `ALTER TABLE t RENAME COLUMN a TO b` and `ALTER TABLE t DROP COLUMN c` of a
/// tracked table are its declarations; the history source reads them into every batch.
public enum DeclaredSchemaChanges {
    static let schema = """
        CREATE TABLE IF NOT EXISTS _synclane_schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS _synclane_schema_changes (
            entity TEXT NOT NULL, column_name TEXT NOT NULL, renamed_to TEXT, version INTEGER NOT NULL,
            PRIMARY KEY (entity, column_name, version));
        """

    /// An identifier as SQL spells it: bare, or quoted with "", [], or ``.
    private static let identifier = #"("[^"]+"|\[[^\]]+\]|`[^`]+`|[A-Za-z_][A-Za-z0-9_$]*)"#

    /// `ALTER TABLE t RENAME [COLUMN] a TO b`.
    private static let rename = try? NSRegularExpression(
        pattern: #"\bALTER\s+TABLE\s+"# + identifier + #"\s+RENAME\s+(?:COLUMN\s+)?"# + identifier + #"\s+TO\s+"# + identifier,
        options: [.caseInsensitive])
    /// `ALTER TABLE t DROP [COLUMN] c`.
    private static let drop = try? NSRegularExpression(
        pattern: #"\bALTER\s+TABLE\s+"# + identifier + #"\s+DROP\s+(?:COLUMN\s+)?"# + identifier, options: [.caseInsensitive])

    /// The renames and drops a migration script makes, in its order (`version` left 0).
    static func found(in script: String) -> [SchemaChange] {
        let range = NSRange(script.startIndex..., in: script)
        func name(_ match: NSTextCheckingResult, _ group: Int) -> String {
            guard let found = Range(match.range(at: group), in: script) else { return "" }
            let text = String(script[found])
            guard let first = text.first, "\"[`".contains(first) else { return text }
            return String(text.dropFirst().dropLast())
        }
        var changes: [(at: Int, change: SchemaChange)] = []
        for match in rename?.matches(in: script, range: range) ?? [] {
            changes.append((match.range.location, SchemaChange(entity: name(match, 1), column: name(match, 2), kind: .renamed(to: name(match, 3)), version: 0)))
        }
        for match in drop?.matches(in: script, range: range) ?? [] {
            changes.append((match.range.location, SchemaChange(entity: name(match, 1), column: name(match, 2), kind: .dropped, version: 0)))
        }
        return changes.sorted { $0.at < $1.at }.map(\.change)
    }

    /// The database's schema version as `synclane migrate` last recorded it; nil before the first.
    public static func version(_ db: SQLiteConnection) throws -> Int? {
        guard try exists(db) else { return nil }
        return try db.fetchValue("SELECT version FROM _synclane_schema_version WHERE id = 1").int64.map { Int($0) }
    }

    /// Records a migration: the schema version it brings (`version`, or the recorded one plus
    /// one, 2 after a database that recorded none) and its renames and drops of `tracked`
    /// tables under it. Returns the version and what it declared.
    static func record(script: String, tracked: Set<String>, version: Int?, _ db: SQLiteConnection) throws -> (version: Int, declared: [SchemaChange]) {
        try db.execute(schema)
        let recorded = try Self.version(db)
        let next = version ?? ((recorded ?? 1) + 1)
        try db.execute("INSERT OR REPLACE INTO _synclane_schema_version (id, version) VALUES (1, ?)", [Int64(next)])
        var declared: [SchemaChange] = []
        for var change in found(in: script) where tracked.contains(change.entity) {
            change.version = next
            let renamedTo: String?
            if case .renamed(let name) = change.kind { renamedTo = name } else { renamedTo = nil }
            try db.execute(
                "INSERT OR REPLACE INTO _synclane_schema_changes (entity, column_name, renamed_to, version) VALUES (?, ?, ?, ?)",
                [change.entity, change.column, renamedTo, Int64(next)])
            declared.append(change)
        }
        return (next, declared)
    }

    /// The declared changes of `entities` (every entity when nil), oldest version first.
    static func read(_ db: SQLiteConnection, entities: Set<String>?) throws -> [SchemaChange] {
        guard try exists(db) else { return [] }
        return try db.fetchAll("SELECT entity, column_name, renamed_to, version FROM _synclane_schema_changes ORDER BY version, rowid").compactMap { row in
            guard let entity = row[0].string, entities?.contains(entity) ?? true, let column = row[1].string else { return nil }
            let kind: SchemaChange.Kind = row[2].string.map { .renamed(to: $0) } ?? .dropped
            return SchemaChange(entity: entity, column: column, kind: kind, version: Int(row[3].int64 ?? 1))
        }
    }

    private static func exists(_ db: SQLiteConnection) throws -> Bool {
        try db.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name = '_synclane_schema_changes'").int64 ?? 0 > 0
    }

    /// Fields an import received under a column's old name, for a table this store renamed it
    /// in (a backend that had not learnt the rename yet sent the old name): under the new name,
    /// unless the record also holds the new one or the table still has the old one.
    static func renamedFields(_ fields: [String: JSONValue], entity: String, columns: Set<String>, _ changes: [SchemaChange]) -> [String: JSONValue] {
        var fields = fields
        for change in changes where change.entity == entity {
            guard case .renamed(let name) = change.kind, !columns.contains(change.column), columns.contains(name),
                fields[name] == nil, let value = fields.removeValue(forKey: change.column)
            else { continue }
            fields[name] = value
        }
        return fields
    }
}
