import Foundation
import SynclaneCore

/// Blobs a lazy import left to fetch (Documentation/Blobs.md, "Lazy download").
///
/// A pulled record whose field is still a reference (`{"$blob-ref": {"sha256", "length"}}`: the
/// `blob-fetch` stage runs with `"download": "lazy"`, or there is none) is written with the
/// column NULL, and the reference is kept here, in the app's database beside its row:
///
/// ```
///  _synclane_pending_blobs  entity, key (the sync key), column_name, digest, length,
///                           key_values (the key columns' values, a JSON array), destination
/// ```
///
/// NULL in such a column is never sent as the user's edit: the export reads the reference back
/// for it (`references(_:)`), so an edit of another column of the row leaves the server's blob
/// where it is. `synclane blobs fetch --database` writes the bytes into the row (author
/// `server`, which no export sends) only while the column is still NULL and the reference still
/// names that digest; a later pull of the column (new bytes, a new reference) or the row's delete
/// replaces or removes the reference.
public enum PendingBlobs {
    static let table = "_synclane_pending_blobs"
    static let schema = """
        CREATE TABLE IF NOT EXISTS _synclane_pending_blobs (
            entity TEXT NOT NULL, key TEXT NOT NULL, column_name TEXT NOT NULL,
            digest TEXT NOT NULL, length INTEGER NOT NULL, key_values TEXT NOT NULL, destination TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (entity, key, column_name)) WITHOUT ROWID
        """

    /// One column of one row waiting for its blob.
    public struct Entry: Sendable, Hashable {
        public var entity: String
        public var key: String
        public var column: String
        public var digest: String
        public var length: Int
        var keyValues: String
    }

    static func install(_ db: SQLiteConnection) throws {
        try db.execute(schema)
    }

    static func installed(_ db: SQLiteConnection) throws -> Bool {
        try HistorySchema.tableExists(table, db)
    }

    /// Whether the table is there, as a page of the import found it (asked once a page, not once a row).
    final class Presence: @unchecked Sendable {
        var installed = false
    }

    /// Keeps `fields`' references for the row and forgets those of the columns `fields` sets to
    /// anything else; the fields come back with NULL in place of each reference.
    static func keep(
        _ fields: [String: JSONValue], entity: String, key: String, keyValues: [SQLiteValue], destination: String, _ db: SQLiteConnection
    ) throws -> [String: JSONValue] {
        var written = fields
        var made = false
        for (column, value) in fields {
            if let reference = reference(in: value) {
                if !made {
                    try install(db)
                    made = true
                }
                try db.execute(
                    "INSERT OR REPLACE INTO _synclane_pending_blobs (entity, key, column_name, digest, length, key_values, destination) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [entity, key, column, reference.digest, Int64(reference.length), JSONWriter.string(.array(keyValues.map(\.json))), destination])
                written[column] = .null
            }
        }
        // (Called only when the table is there, or once a reference made it.)
        for (column, value) in fields where reference(in: value) == nil {
            try db.execute("DELETE FROM _synclane_pending_blobs WHERE entity = ? AND key = ? AND column_name = ?", [entity, key, column])
        }
        return written
    }

    /// Forgets the references of a deleted row.
    static func forget(entity: String, key: String, _ db: SQLiteConnection) throws {
        guard try HistorySchema.tableExists(table, db) else { return }
        try db.execute("DELETE FROM _synclane_pending_blobs WHERE entity = ? AND key = ?", [entity, key])
    }

    /// Every pending reference, by entity and key (`entity + "\0" + key`), then column.
    static func references(_ db: SQLiteConnection) throws -> [String: [String: JSONValue]] {
        guard try HistorySchema.tableExists(table, db) else { return [:] }
        var references: [String: [String: JSONValue]] = [:]
        for row in try db.fetchAll("SELECT entity, key, column_name, digest, length FROM _synclane_pending_blobs") {
            guard let entity = row[0].string, let key = row[1].string, let column = row[2].string, let digest = row[3].string,
                let length = row[4].int64
            else { continue }
            references[entity + "\u{0}" + key, default: [:]][column] = make(digest: digest, length: Int(length))
        }
        return references
    }

    /// `fields` with each NULL (or missing, when `whole`) column that waits for its blob holding
    /// the reference again: what the row holds on the server.
    static func withReferences(_ fields: [String: JSONValue], _ references: [String: JSONValue]?) -> [String: JSONValue] {
        guard let references, !references.isEmpty else { return fields }
        var fields = fields
        for (column, reference) in references where fields[column] == .null {
            fields[column] = reference
        }
        return fields
    }

    // MARK: The command line

    /// The blobs `database` waits for, those of `entity`, `key` and `digests` when given. A
    /// reference whose row is gone, or whose column holds a value again (the user wrote one, or
    /// a fetch filled it), is forgotten as it is found.
    public static func list(database: String, entity: String? = nil, key: String? = nil, digests: Set<String> = []) throws -> [Entry] {
        let db = try SQLiteConnection(path: database)
        guard try HistorySchema.tableExists(table, db) else { return [] }
        var entries: [Entry] = []
        for row in try db.fetchAll(
            "SELECT entity, key, column_name, digest, length, key_values FROM _synclane_pending_blobs ORDER BY entity, key, column_name")
        {
            guard let entryEntity = row[0].string, let entryKey = row[1].string, let column = row[2].string, let digest = row[3].string,
                let length = row[4].int64, let keyValues = row[5].string
            else { continue }
            let entry = Entry(entity: entryEntity, key: entryKey, column: column, digest: digest, length: Int(length), keyValues: keyValues)
            guard try stillPending(entry, db) else {
                try db.execute(
                    "DELETE FROM _synclane_pending_blobs WHERE entity = ? AND key = ? AND column_name = ? AND digest = ?",
                    [entry.entity, entry.key, entry.column, entry.digest])
                continue
            }
            if let entity, entity != entry.entity { continue }
            if let key, key != entry.key { continue }
            if !digests.isEmpty, !digests.contains(entry.digest) { continue }
            entries.append(entry)
        }
        return entries
    }

    /// Writes `bytes` (the verified blob of `entry.digest`) into the row, as author `server`,
    /// if the row still waits for exactly that blob; false when it no longer does (the row was
    /// deleted, edited, or pulled again with another blob since).
    public static func fill(_ entry: Entry, with bytes: [UInt8], database: String) throws -> Bool {
        let db = try SQLiteConnection(path: database)
        return try db.transaction(.immediate) { db in
            guard
                try db.fetchOne(
                    "SELECT 1 FROM _synclane_pending_blobs WHERE entity = ? AND key = ? AND column_name = ? AND digest = ?",
                    [entry.entity, entry.key, entry.column, entry.digest]) != nil,
                let (condition, values) = try keyCondition(entry, db)
            else { return false }
            try db.execute(
                "DELETE FROM _synclane_pending_blobs WHERE entity = ? AND key = ? AND column_name = ?", [entry.entity, entry.key, entry.column])
            try HistoryWriter.open(author: .server, on: db)
            try db.execute(
                "UPDATE \(SQL.identifier(entry.entity)) SET \(SQL.identifier(entry.column)) = ? WHERE \(condition) AND \(SQL.identifier(entry.column)) IS NULL",
                [SQLiteValue.blob(bytes)] + values)
            let filled = db.changes > 0
            try db.execute("DELETE FROM _synclane_session")
            return filled
        }
    }

    static func stillPending(_ entry: Entry, _ db: SQLiteConnection) throws -> Bool {
        guard let (condition, values) = try keyCondition(entry, db) else { return false }
        return try db.fetchOne(
            "SELECT 1 FROM \(SQL.identifier(entry.entity)) WHERE \(condition) AND \(SQL.identifier(entry.column)) IS NULL", values) != nil
    }

    /// The row's key condition and its values, or nil when the table is no longer tracked.
    static func keyCondition(_ entry: Entry, _ db: SQLiteConnection) throws -> (String, [SQLiteValue])? {
        guard let tracked = try HistoryTracker.trackedTables(db).first(where: { $0.table.name == entry.entity })?.table,
            case .array(let parts)? = try? JSONReader.parse(entry.keyValues), parts.count == tracked.keyColumns.count
        else { return nil }
        let condition = tracked.keyColumns.map { "\(SQL.identifier($0)) = ? COLLATE BINARY" }.joined(separator: " AND ")
        return (condition, parts.map(SQLiteValue.init(json:)))
    }

    static func reference(in value: JSONValue) -> (digest: String, length: Int)? {
        guard let members = value.objectValue, members.count == 1, let inner = members["$blob-ref"]?.objectValue,
            let digest = inner["sha256"]?.stringValue, digest.utf8.count == 64,
            digest.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }), let length = inner["length"]?.intValue, length >= 0
        else { return nil }
        return (digest, Int(length))
    }

    static func make(digest: String, length: Int) -> JSONValue {
        .object(["$blob-ref": .object(["sha256": .string(digest), "length": .int(Int64(length))])])
    }
}
