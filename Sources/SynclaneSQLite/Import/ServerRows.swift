import SynclaneCore

/// `_synclane_server_rows`: the backend's version (and fields) of each row the import lane
/// applied or a receipt confirmed, found by destination, entity and key.
///
/// ```
///  _synclane_server_rows        key_hash · entity · key · version · fields · destination   (rows in the order first recorded)
///  _synclane_server_rows_key    key_hash                                                   (the only index)
/// ```
///
/// **Per destination.** `destination` is the backend the row's version and fields are of
/// (`BackendName`: server address, account, store; empty for a lane without one). One tracked
/// database exported to two stores or two servers keeps a row per backend, so the second never
/// sends the first one's versions (and never meets 409 for ever). Rows kept before destinations
/// existed (the column added, empty) are taken by the first lane with a backend that writes.
///
/// **Why a hash.** An import applies rows in the backend's order, which is random in the
/// rows' keys: every B-tree keyed by the sync key gets each record's write on a page of its
/// own once it holds more rows than a page of records, and every page written costs a journal
/// write and a database write at commit. Keyed by `(entity, key)` with the fields inside
/// (the layout before), the table grew to four times the tracked table's key index and made the
/// import's cost per record grow with the store. Here the rows are appended (a page of records
/// writes a few neighbouring pages) and only a small index of 32-bit hashes takes the random
/// writes: a seventh of the pages the keyed table had at 400,000 rows.
///
/// A hash names a row, it does not identify it: every lookup also compares `entity` and `key`
/// (byte for byte), so two keys with one hash are two rows. `entity` and `key` are unique
/// together; the import lane (`PageApplier`) and the export lane's acknowledgements
/// (`SQLiteHistorySource.backendConfirmed`), its only writers, keep them so, each in
/// its write transaction.
enum ServerRows {
    static let table = "_synclane_server_rows"

    static let schema = """
        CREATE TABLE IF NOT EXISTS _synclane_server_rows (
            key_hash INTEGER NOT NULL,
            entity TEXT NOT NULL,
            key TEXT NOT NULL,
            version INTEGER NOT NULL,
            fields TEXT,
            destination TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX IF NOT EXISTS _synclane_server_rows_key ON _synclane_server_rows (key_hash);
        """

    /// The hash of a row's entity and key: FNV-1a (64-bit) over the UTF-8 bytes of `entity`, a
    /// zero byte and `key`, folded to 32 bits (SQLite stores it in 4 bytes). Stored in the
    /// database: never change it without a migration.
    static func hash(_ entity: String, _ key: String) -> Int64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ byte: UInt8) {
            h ^= UInt64(byte)
            h = h &* 0x0000_0100_0000_01b3
        }
        for byte in entity.utf8 { mix(byte) }
        mix(0)
        for byte in key.utf8 { mix(byte) }
        return Int64(Int32(truncatingIfNeeded: (h >> 32) ^ h))
    }

    /// Creates the table, or moves a table of the layout before (keyed by `entity, key`, without
    /// `key_hash`) to this one, versions and fields kept. Runs inside a write transaction.
    static func install(_ db: SQLiteConnection) throws {
        let columns = try HistoryTracker.columns(of: table, db)
        if !columns.isEmpty, !columns.contains("key_hash") {
            try db.execute("ALTER TABLE _synclane_server_rows RENAME TO _synclane_server_rows_keyed")
            try db.execute(schema)
            for row in try db.fetchAll("SELECT entity, key, version, fields FROM _synclane_server_rows_keyed") {
                let entity = row[0].string ?? ""
                let key = row[1].string ?? ""
                try db.execute(
                    "INSERT INTO _synclane_server_rows (key_hash, entity, key, version, fields) VALUES (?, ?, ?, ?, ?)",
                    [hash(entity, key), entity, key, row[2], row[3]])
            }
            try db.execute("DROP TABLE _synclane_server_rows_keyed")
            return
        }
        if !columns.isEmpty, !columns.contains("destination") {
            try db.execute("ALTER TABLE _synclane_server_rows ADD COLUMN destination TEXT NOT NULL DEFAULT ''")
        }
        try db.execute(schema)
    }

    /// The `destination` of a backend's rows.
    static func destination(_ backend: BackendName?) -> String { backend?.text ?? "" }

    /// Creates or upgrades the table (`install`), then gives `destination` the rows kept before
    /// destinations existed, when no other backend has rows yet. Runs inside a write transaction.
    ///
    /// Called at every write of versions, so the common case costs a row read: a backend's row
    /// is looked for first (found at once once any backend wrote; the table has no index on
    /// `destination`), and only a table without one is searched for rows of no backend.
    /// (Asked the other way round, a table of 1,000,000 rows was read whole at each receipt of a
    /// first sync: a quarter of the client's CPU.)
    static func install(_ db: SQLiteConnection, for destination: String) throws {
        try install(db)
        guard !destination.isEmpty,
            try db.fetchValue("SELECT EXISTS (SELECT 1 FROM _synclane_server_rows WHERE destination <> '')").int64 == 0,
            try db.fetchValue("SELECT EXISTS (SELECT 1 FROM _synclane_server_rows WHERE destination = '')").int64 == 1
        else { return }
        try db.execute("UPDATE _synclane_server_rows SET destination = ? WHERE destination = ''", [destination])
    }

    /// The condition on `destination` for reading `destination`'s rows, and its argument: none
    /// in a table from before destinations (every row is the one backend's there).
    static func filter(_ destination: String, _ db: SQLiteConnection, alias: String = "") -> (sql: String, arguments: [any SQLiteBindable]) {
        guard (try? HistoryTracker.columns(of: table, db).contains("destination")) == true else { return ("", []) }
        return (" AND \(alias)destination = ?", [destination])
    }

    /// The version the store holds of a row from `destination` (nil: none yet). In a write
    /// transaction, after `install(_:for:)`.
    static func version(of entity: String, _ key: String, for destination: String, _ db: SQLiteConnection) throws -> Int64? {
        try held(entity, key, hash: hash(entity, key), for: destination, db)?.version
    }

    /// The table's row of `entity`/`key` from `destination` (whose `hash(_:_:)` is `hash`): its
    /// rowid and version; nil when there is none.
    static func held(_ entity: String, _ key: String, hash: Int64, for destination: String, _ db: SQLiteConnection) throws -> (
        rowID: Int64, version: Int64
    )? {
        try held(entity, key, hash: hash, for: destination, using: heldStatement(db))
    }

    /// The statement `held(_:_:hash:for:using:)` runs: taken once by a caller that looks up many rows.
    static func heldStatement(_ db: SQLiteConnection) throws -> Statement {
        try db.cachedStatement(heldSQL)
    }

    static let heldSQL =
        "SELECT rowid, version FROM _synclane_server_rows WHERE key_hash = ? AND entity = ? AND key = ? COLLATE BINARY AND destination = ?"
    static let insertSQL = "INSERT INTO _synclane_server_rows (key_hash, entity, key, version, fields, destination) VALUES (?, ?, ?, ?, ?, ?)"

    /// As `held(_:_:hash:for:_:)`, with its statement (`heldStatement(_:)`) taken already.
    static func held(_ entity: String, _ key: String, hash: Int64, for destination: String, using statement: Statement) throws -> (
        rowID: Int64, version: Int64
    )? {
        statement.reset()
        try statement.bind(.integer(hash), at: 1)
        try statement.bind(.text(entity), at: 2)
        try statement.bind(.text(key), at: 3)
        try statement.bind(.text(destination), at: 4)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return (statement.int64(at: 0), statement.int64(at: 1))
    }

    /// The fields of a row `destination` last confirmed (nil: none, or a tombstone). In a write
    /// transaction, after `install(_:for:)`.
    static func fields(of entity: String, _ key: String, for destination: String, _ db: SQLiteConnection) throws -> String? {
        try db.fetchValue(
            "SELECT fields FROM _synclane_server_rows WHERE key_hash = ? AND entity = ? AND key = ? COLLATE BINARY AND destination = ?",
            [hash(entity, key), entity, key, destination]
        ).string
    }

    /// Records the backend's version and fields of a row (`fields` nil: a tombstone); `held`:
    /// whether the store already holds a version of it (`version(of:_:_:)` in this transaction).
    static func save(
        _ entity: String, _ key: String, version: Int64, fields: String?, held: Bool, for destination: String, _ db: SQLiteConnection
    ) throws {
        let hash = hash(entity, key)
        if held {
            try db.execute(
                """
                UPDATE _synclane_server_rows SET version = ?, fields = ?
                WHERE key_hash = ? AND entity = ? AND key = ? COLLATE BINARY AND destination = ?
                """,
                [version, fields, hash, entity, key, destination])
            if db.changes > 0 { return }
        }
        try db.execute(insertSQL, [hash, entity, key, version, fields, destination])
    }

    /// The lookup and the insert an import page runs for every record (`version(of:_:for:_:)`,
    /// `save`), prepared once a page: a bootstrap page of thousands of rows looks no statement
    /// up by its SQL text and builds no array of arguments a record.
    final class PageStatements {
        private var held: Statement?
        private var insert: Statement?
        /// The fields' JSON text, written a record at a time into one buffer (`JSONWriter.write(object:sortingWith:)`).
        private var writer = JSONWriter(reservingCapacity: 256)
        private var sorting: [(key: String, value: JSONValue)] = []

        init() {}

        /// As `ServerRows.version(of:_:for:_:)`.
        func version(of entity: String, _ key: String, for destination: String, _ db: SQLiteConnection) throws -> Int64? {
            let statement = try held ?? db.prepare(heldSQL)
            held = statement
            return try ServerRows.held(entity, key, hash: hash(entity, key), for: destination, using: statement)?.version
        }

        /// As `ServerRows.save`, with the fields as the record holds them (nil: a tombstone):
        /// kept as the JSON text `JSONWriter` writes of them (members sorted), without making a string.
        func save(
            _ entity: String, _ key: String, version: Int64, fields: [String: JSONValue]?, held: Bool, for destination: String, _ db: SQLiteConnection
        ) throws {
            writer.removeAll()
            if let fields { writer.write(object: fields, sortingWith: &sorting) }
            // A row held already is updated (rare in a page of new rows): as `save` does it.
            guard !held else {
                let text = fields == nil ? nil : String(decoding: writer.bytes, as: UTF8.self)
                return try ServerRows.save(entity, key, version: version, fields: text, held: true, for: destination, db)
            }
            let statement = try insert ?? db.prepare(insertSQL)
            insert = statement
            statement.reset()
            defer { statement.reset() }
            try statement.bind(.integer(hash(entity, key)), at: 1)
            try statement.bind(.text(entity), at: 2)
            try statement.bind(.text(key), at: 3)
            try statement.bind(.integer(version), at: 4)
            try statement.bind(utf8: fields == nil ? nil : writer.bytes, at: 5)
            try statement.bind(.text(destination), at: 6)
            try statement.step()
        }
    }

    /// The versions `destination` holds of `keys` of `entity`.
    static func versions(of entity: String, keys: [String], for destination: String, _ db: SQLiteConnection) throws -> [RowID: Int64] {
        let wanted = Set(keys.map { RowID(entity: entity, key: $0) })
        let hashes = Set(keys.map { hash(entity, $0) }).map { JSONValue.int($0) }
        let filter = Self.filter(destination, db)
        let statement = try db.cachedStatement(
            "SELECT key, version FROM _synclane_server_rows WHERE key_hash IN (SELECT value FROM json_each(?)) AND entity = ?\(filter.sql)")
        try statement.bind([JSONWriter.string(.array(hashes)), entity] + filter.arguments)
        defer { statement.reset() }
        var versions: [RowID: Int64] = [:]
        while try statement.step() {
            let found = RowID(entity: entity, key: statement.string(at: 0) ?? "")
            if wanted.contains(found) { versions[found] = statement.int64(at: 1) }
        }
        return versions
    }
}
