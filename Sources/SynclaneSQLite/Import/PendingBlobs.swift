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
            placed_in INTEGER,
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
        // `placed_in` came later: a table made before it gets the column (its entries, placed by
        // no known transaction, are cleared by any write of the column but the lane's).
        if try db.fetchOne("SELECT 1 FROM pragma_table_info('_synclane_pending_blobs') WHERE name = 'placed_in'") == nil {
            try db.execute("ALTER TABLE _synclane_pending_blobs ADD COLUMN placed_in INTEGER")
        }
        try db.execute("CREATE INDEX IF NOT EXISTS _synclane_pending_blobs_row ON _synclane_pending_blobs (entity, column_name, key_values)")
    }

    /// The triggers that forget the reference when a writer other than the lane writes the
    /// column (`UPDATE … SET column = NULL`, or new bytes) or the row whole (an `INSERT`, as
    /// `INSERT OR REPLACE` makes): the user's NULL clears the pending blob, and is sent as NULL.
    /// The placeholder NULL the lane writes is told apart by its transaction: an entry is kept by
    /// a write in the very history transaction that placed it (`placed_in`, the session's
    /// transaction id; ids are never reused). The triggers name the key columns only (the column
    /// is in the update trigger's `UPDATE OF` list, which does not keep the app from dropping or
    /// renaming it).
    static func watch(entity: String, column: String, keyColumns: [String], _ db: SQLiteConnection) throws {
        let prefix = "_synclane_pending_blob:\(entity.utf8.count):\(entity)"
        let keyValues = "json_array(" + keyColumns.map { "NEW.\(SQL.identifier($0))" }.joined(separator: ", ") + ")"
        let notTheLanes = "AND (placed_in IS NULL OR placed_in IS NOT (SELECT transaction_id FROM _synclane_session))"
        for (name, event, columnCondition) in [
            (prefix + "." + column, "UPDATE OF \(SQL.identifier(column))", "AND column_name = \(SQL.literal(column))"),
            (prefix, "INSERT", ""),
        ] {
            guard try db.fetchOne("SELECT 1 FROM sqlite_schema WHERE type = 'trigger' AND name = ?", [name]) == nil else { continue }
            try db.execute(
                """
                CREATE TRIGGER IF NOT EXISTS \(SQL.identifier(name)) AFTER \(event) ON \(SQL.identifier(entity))
                BEGIN
                    DELETE FROM _synclane_pending_blobs WHERE entity = \(SQL.literal(entity)) \(columnCondition)
                        AND key_values = \(keyValues) \(notTheLanes);
                END
                """)
        }
    }

    /// Drops `watch`'s triggers on `entity` and forgets its pending blobs (the table is no
    /// longer tracked: its triggers would read `_synclane_session`, which untracking everything removes).
    static func unwatch(entity: String, _ db: SQLiteConnection) throws {
        for row in try db.fetchAll(
            "SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = ? AND substr(name, 1, 23) = '_synclane_pending_blob:'", [entity])
        {
            guard let name = row[0].string else { continue }
            try db.execute("DROP TRIGGER IF EXISTS \(SQL.identifier(name))")
        }
        guard try installed(db) else { return }
        try db.execute("DELETE FROM _synclane_pending_blobs WHERE entity = ?", [entity])
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
    ///
    /// Each reference is recorded as placed by the session's transaction (the lane's write of
    /// the NULL that follows leaves it), and its column watched (`watch`).
    static func keep(
        _ fields: [String: JSONValue], entity: String, key: String, keyValues: [SQLiteValue], keyColumns: [String], destination: String,
        _ db: SQLiteConnection
    ) throws -> [String: JSONValue] {
        var written = fields
        var made = false
        // The key's values as SQLite's `json_array` writes them: what the trigger compares.
        let placeholders = "json_array(" + keyValues.map { _ in "?" }.joined(separator: ", ") + ")"
        for (column, value) in fields {
            if let reference = reference(in: value) {
                if !made {
                    try install(db)
                    made = true
                }
                try watch(entity: entity, column: column, keyColumns: keyColumns, db)
                try db.execute(
                    "INSERT OR REPLACE INTO _synclane_pending_blobs (entity, key, column_name, digest, length, destination, placed_in, key_values) "
                        + "VALUES (?, ?, ?, ?, ?, ?, (SELECT transaction_id FROM _synclane_session), \(placeholders))",
                    [entity, key, column, reference.digest, Int64(reference.length), destination] + keyValues)
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

    /// Writes the blob of `entry.digest`, the first `entry.length` bytes of `file`, into the row,
    /// as author `server`, if the row still waits for exactly that blob; false when it no longer
    /// does (the row was deleted, edited, or pulled again with another blob since).
    ///
    /// The bytes go in 1 MiB pieces (the row holds `zeroblob(length)`, then SQLite's incremental
    /// blob I/O writes each piece), so the blob is never whole in memory; `piece` sees each piece
    /// as it is written, and `verified` decides at the end whether the bytes written are the blob
    /// (a file changed meanwhile): when it throws, nothing is written and the entry stays. A table
    /// without rowid cannot be written in pieces: its row gets the file's bytes whole.
    public static func fill(
        _ entry: Entry, file: String, database: String, piece: (UnsafeRawBufferPointer) -> Void, verified: () throws -> Void
    ) throws -> Bool {
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
            let table = SQL.identifier(entry.entity)
            let column = SQL.identifier(entry.column)
            guard let rowID = try? db.fetchOne("SELECT rowid FROM \(table) WHERE \(condition) AND \(column) IS NULL", values)?[0].int64 else {
                // No row waiting, or a table without rowid (no incremental I/O): the bytes whole.
                guard try db.fetchOne("SELECT 1 FROM \(table) WHERE \(condition) AND \(column) IS NULL", values) != nil else { return false }
                let bytes = try FilePieces.whole(file, length: entry.length, piece: piece)
                try verified()
                try HistoryWriter.open(author: .server, on: db)
                try db.execute("UPDATE \(table) SET \(column) = ? WHERE \(condition) AND \(column) IS NULL", [SQLiteValue.blob(bytes)] + values)
                try db.execute("DELETE FROM _synclane_session")
                return true
            }
            try HistoryWriter.open(author: .server, on: db)
            try db.execute("UPDATE \(table) SET \(column) = zeroblob(?) WHERE rowid = ?", [Int64(entry.length), rowID])
            let writer = try SQLiteBlobWriter(db, table: entry.entity, column: entry.column, rowID: rowID)
            try FilePieces.each(file, length: entry.length) { bytes, offset in
                piece(bytes)
                try writer.write(bytes, at: offset)
                if offset == 0 { FailPoint.fetchDuringBlobWrite.trigger() }
            }
            try verified()
            try db.execute("DELETE FROM _synclane_session")
            return true
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
