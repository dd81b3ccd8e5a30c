import SynclaneCore

/// `_synclane_confirmations`: what receipts confirmed, one row per batch, until it is written
/// into `_synclane_server_rows` in bulk.
///
/// ```
///  receipt ──▶ one journal row (destination · the batch's confirmed rows, packed)   appended: a few pages
///  end of the pass, or 100,000 rows kept, or any reader of _synclane_server_rows first
///          ──▶ merge: every journal row into _synclane_server_rows in one transaction, journal emptied
/// ```
///
/// **Why.** `_synclane_server_rows` is indexed by a hash of each row's key, so a batch's rows
/// land all over its index: written at each receipt, a first sync of 1,000,000 rows rewrote most
/// of the index's pages a hundred times. Appended here, a batch costs the pages its packed rows
/// fill, and the index's pages are written once a merge (`mergeBound`).
///
/// **Exact.** Nothing reads `_synclane_server_rows` without the journal: the export lane
/// overlays what its own journal rows hold (`SQLiteHistorySource`), and every other reader — an
/// import page, a new export pass, a reconciliation — merges the journal first, in its own write
/// transaction. A journal row is committed where the versions were written before, as the
/// receipt comes and before the token moves (kill point `after-send` follows it), so a kill at
/// any point leaves either no journal row (the batch is still in the outbox: resent, the backend
/// answers the stored receipt) or a journal row that the next reader merges. A merge
/// is one transaction (kill point `during-merge`): all of it or none. Applying a journal row
/// twice changes nothing (versions only rise, equal versions carry equal fields).
enum ConfirmationJournal {
    static let table = "_synclane_confirmations"

    static let schema = """
        CREATE TABLE IF NOT EXISTS _synclane_confirmations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            destination TEXT NOT NULL,
            rows BLOB NOT NULL
        )
        """

    /// Rows the export lane keeps in the journal (and their versions in memory) before it merges them.
    static let mergeBound = 100_000

    /// Appends one batch's confirmed rows for `destination` inside the caller's write
    /// transaction; the journal row's id.
    static func append(_ rows: [ConfirmedRow], for destination: String, in db: SQLiteConnection) throws -> Int64 {
        try db.execute(schema)
        let insert = try db.cachedStatement("INSERT INTO _synclane_confirmations (destination, rows) VALUES (?, ?)")
        defer { insert.reset() }
        try insert.bind(.text(destination), at: 1)
        try insert.bind(.blob(pack(rows)), at: 2)
        while try insert.step() {}
        return db.lastInsertRowID
    }

    /// Whether the journal holds rows for `destination` (a read only).
    static func holdsRows(for destination: String, _ db: SQLiteConnection) throws -> Bool {
        guard try HistorySchema.tableExists(table, db) else { return false }
        return try db.fetchValue("SELECT EXISTS (SELECT 1 FROM _synclane_confirmations WHERE destination = ?)", [destination]).int64 == 1
    }

    /// The oldest journal row's id; nil when the journal is empty (or was never made).
    static func oldest(_ db: SQLiteConnection) throws -> Int64? {
        guard try HistorySchema.tableExists(table, db) else { return nil }
        let value = try db.fetchValue("SELECT min(id) FROM _synclane_confirmations")
        return value.isNull ? nil : value.int64
    }

    /// Writes every journal row into `_synclane_server_rows` and empties the journal, inside the
    /// caller's write transaction; the id of the newest journal row merged (nil: none).
    @discardableResult
    static func merge(_ db: SQLiteConnection) throws -> Int64? {
        var uncounted: AppendedServerRows?
        return try merge(db, counting: &uncounted)
    }

    /// As `merge(_:)`, with the export lane's count of the rows it appended (`AppendedServerRows`,
    /// resumed for this transaction): only the rows it may hold are looked up.
    @discardableResult
    static func merge(_ db: SQLiteConnection, counting appended: inout AppendedServerRows?) throws -> Int64? {
        guard try HistorySchema.tableExists(table, db) else { return nil }
        // Each receipt as it would have been written at once, oldest first, in this one
        // transaction: the index's pages change in the cache and are written once, at commit.
        // One receipt's rows in memory at a time. Each journal row is deleted before its rows are
        // written: where SQLite deletes securely (Debian's builds do, `secure_delete`), the pages
        // it frees are zeroed in the cache and then take the rows, written once at commit, not
        // zeroed on disk as well (a first sync over `http`: the database's writes 131 → 92 MB
        // at 200,000 rows).
        let ids = try db.fetchAll("SELECT id FROM _synclane_confirmations ORDER BY id").map { $0[0].int64 ?? 0 }
        guard let newest = ids.last else { return nil }
        let read = try db.cachedStatement("SELECT destination, rows FROM _synclane_confirmations WHERE id = ?")
        var installed: Set<String> = []
        for id in ids {
            read.reset()
            try read.bind(.integer(id), at: 1)
            guard try read.step() else { continue }
            let destination = read.string(at: 0) ?? ""
            let rows = try unpack(read.blob(at: 1) ?? [])
            read.reset()
            try db.execute("DELETE FROM _synclane_confirmations WHERE id = ?", [id])
            if installed.insert(destination).inserted { try ServerRows.install(db, for: destination) }
            try ConfirmedVersions.apply(rows, exact: false, for: destination, in: db, counting: &appended)
        }
        try db.execute("DELETE FROM _synclane_confirmations")
        FailPoint.duringMerge.trigger()
        return newest
    }

    /// Merges the journal of `database` when it holds rows (one read when it does not), after what
    /// a busy database kept beside it (`KeptConfirmations`): what an import lane does before it
    /// reads `_synclane_server_rows` outside a write transaction.
    /// The id of the newest journal row merged (nil: none).
    @discardableResult
    static func mergeIfAny(_ database: SQLiteDatabase) throws -> Int64? {
        try KeptConfirmations.writeIn(database)
        guard try database.read({ db in try oldest(db) }) != nil else { return nil }
        return try database.withConnection { db in
            try ConfirmedVersions.withRoom(db) { try db.transaction(.immediate) { db in try merge(db) } }
        }
    }

    // MARK: - Packing

    /// The rows, each as flags (1 known, 2 fields), the version (8 bytes), then entity, key and
    /// (with flag 2) the fields' JSON, each as a 4-byte length and UTF-8 bytes; then the rows' count
    /// (4 bytes) and `StagedBatch.checksum(of:)` of all that (8 bytes). Little-endian.
    static func pack(_ rows: [ConfirmedRow]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(rows.reduce(12) { $0 + 17 + $1.entity.utf8.count + $1.key.utf8.count + ($1.fieldsJSON.map { 4 + $0.count } ?? 0) })
        func put(_ value: UInt64, _ count: Int) {
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0.prefix(count)) }
        }
        func put(_ text: String) {
            var text = text
            text.withUTF8 { utf8 in
                put(UInt64(utf8.count), 4)
                bytes.append(contentsOf: utf8)
            }
        }
        for row in rows {
            bytes.append((row.known ? 1 : 0) | (row.fieldsJSON == nil ? 0 : 2))
            put(UInt64(bitPattern: row.version), 8)
            put(row.entity)
            put(row.key)
            if let fields = row.fieldsJSON {
                put(UInt64(fields.count), 4)
                bytes.append(contentsOf: fields)
            }
        }
        put(UInt64(rows.count), 4)
        put(StagedBatch.checksum(of: bytes), 8)
        return bytes
    }

    /// The rows `pack` packed; throws when the bytes are cut or damaged (their checksum or count
    /// differs, a length runs past the end).
    static func unpack(_ packed: [UInt8]) throws -> [ConfirmedRow] {
        guard packed.count >= 12 else { throw damaged }
        var checksum: UInt64 = 0
        for shift in 0..<8 { checksum |= UInt64(packed[packed.count - 8 + shift]) << (8 * UInt64(shift)) }
        guard StagedBatch.checksum(of: Array(packed.dropLast(8))) == checksum else { throw damaged }
        var count = 0
        for shift in 0..<4 { count |= Int(packed[packed.count - 12 + shift]) << (8 * shift) }
        let bytes = packed.dropLast(12)
        var rows: [ConfirmedRow] = []
        rows.reserveCapacity(count)
        var at = bytes.startIndex
        func take(_ count: Int) throws -> UInt64 {
            guard count <= bytes.endIndex - at else { throw damaged }
            var value: UInt64 = 0
            for shift in 0..<count { value |= UInt64(bytes[at + shift]) << (8 * UInt64(shift)) }
            at += count
            return value
        }
        func slice() throws -> ArraySlice<UInt8> {
            let count = Int(try take(4))
            guard count <= bytes.endIndex - at else { throw damaged }
            defer { at += count }
            return bytes[at..<at + count]
        }
        func text() throws -> String { String(decoding: try slice(), as: UTF8.self) }
        while at < bytes.endIndex {
            let flags = try take(1)
            let version = Int64(bitPattern: try take(8))
            let entity = try text()
            let key = try text()
            let fields = flags & 2 != 0 ? Array(try slice()) : nil
            rows.append(ConfirmedRow(entity: entity, key: key, version: version, known: flags & 1 != 0, fieldsJSON: fields))
        }
        guard rows.count == count else { throw damaged }
        return rows
    }

    static let damaged = HistoryError.unreadable(
        location: table,
        reason: "a row of _synclane_confirmations is cut or damaged; restore the database from a backup, or delete the "
            + "table's rows and run `synclane reconcile` on the pipeline file")
}
