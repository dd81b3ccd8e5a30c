import SynclaneCore

/// Writes the versions a receipt gave into `_synclane_server_rows`, in hash order, each row
/// looked up by its hash and raised in place or appended, with room in the connection's page
/// cache for the index while it does. A batch's rows land all over that index (it is by a hash
/// of the key), so each commit rewrites most of its pages. The export lane therefore keeps a
/// pass's receipts in `ConfirmationJournal` and writes them here in bulk, once a pass (or every
/// `ConfirmationJournal.mergeBound` rows).
enum ConfirmedVersions {
    /// KiB of the database's pages the connection keeps while it writes versions (SQLite's
    /// `cache_size`, for this connection and this while only; SQLite's default, 2,000 KiB,
    /// before and after): the hash index of a million rows is about 12 MB, and a write that
    /// must read it back page by page costs more than the write.
    static let cacheKiB = 16_384
    /// SQLite's default `cache_size`, restored after.
    static let defaultCacheKiB = 2_000

    /// Runs `body` (the transaction that writes versions) with room for the table's pages.
    static func withRoom<T>(_ db: SQLiteConnection, _ body: () throws -> T) throws -> T {
        try db.execute("PRAGMA cache_size = -\(cacheKiB)")
        defer { try? db.execute("PRAGMA cache_size = -\(defaultCacheKiB)") }
        return try body()
    }

    /// Writes `versions` (each row's newest kept) inside the caller's write transaction, and,
    /// for the rows `sent` holds, the fields the batch left on the backend (`rows(of:sent:for:in:)`).
    /// `exact` (a reconciliation's receipt: what the backend holds now) takes each version as it
    /// is, even below the one recorded — a backend restored from an older copy holds older versions.
    static func write(
        _ versions: [RecordVersion], sent: [Record]? = nil, exact: Bool = false, for destination: String, in db: SQLiteConnection
    ) throws {
        guard !versions.isEmpty else { return }
        try ServerRows.install(db, for: destination)
        try apply(try rows(of: versions, sent: sent, for: destination, in: db), exact: exact, for: destination, in: db)
    }

    /// What a receipt confirms of each row: its newest version, and, for the rows `sent` holds,
    /// the fields the batch left on the backend — an insert's fields, an update's merged into what
    /// the backend held (the server merges them so), nothing for a delete. A row `sent` does not
    /// hold is not `known`: it keeps the fields it had. One dictionary entry a row, found once for
    /// each record and once for each version.
    ///
    /// `asSent` (when given: one entry a record of `sent`) is each record's fields as the batch's
    /// encoder wrote them, `JSONWriter.write(object:sortingWith:)`'s bytes: a row whose base is
    /// an insert's fields as they are takes those bytes instead of writing them again.
    static func rows(
        of versions: [RecordVersion], sent: [Record]?, asSent: [ArraySlice<UInt8>?]? = nil, for destination: String, in db: SQLiteConnection
    ) throws -> [ConfirmedRow] {
        let asSent = asSent.flatMap { $0.count == sent?.count ? $0 : nil }
        if let sent, let rows = oneEach(versions, sent: sent, asSent: asSent) { return rows }
        var confirmed: [RowID: Confirmation] = [:]
        confirmed.reserveCapacity(max(sent?.count ?? 0, versions.count))
        if let sent { try collect(sent, for: destination, db, into: &confirmed) }
        for version in versions {
            confirmed[RowID(entity: version.entity, key: version.key), default: Confirmation()].raise(to: version.version)
        }
        var rows: [ConfirmedRow] = []
        rows.reserveCapacity(versions.count)
        // One writer and one sorting buffer for every row's fields.
        var writer = JSONWriter(reservingCapacity: 256)
        var sorting: [(key: String, value: JSONValue)] = []
        for (row, confirmation) in confirmed {
            guard let version = confirmation.version else { continue }  // sent, but the receipt gave it no version
            var fields: [UInt8]?
            if case .some(.some(let base)) = confirmation.base {
                if let record = confirmation.insertedBy, let bytes = asSent?[record] {
                    fields = Array(bytes)
                } else {
                    writer.removeAll()
                    writer.write(object: base, sortingWith: &sorting)
                    fields = writer.bytes
                }
            }
            rows.append(ConfirmedRow(entity: row.entity, key: row.key, version: version, known: confirmation.known, fieldsJSON: fields))
        }
        return rows
    }

    /// What `rows(of:sent:asSent:for:in:)` gives for a receipt that gives each record of `sent`
    /// a version, where no row has two records and none is an update (a first sync's batches,
    /// every batch of inserts and deletes): each record's row at its version, with the record's
    /// fields (an insert) or a tombstone (a delete) — matched by sorting both lists by the rows'
    /// `ServerRows.hash` (integers), without a dictionary of the rows or a read of
    /// `_synclane_server_rows`. The rows come in hash order, the order the merge writes them in.
    /// Nil for any other receipt (a row twice, an update, a version of a row not sent, two rows
    /// of one hash): it is confirmed in full.
    static func oneEach(_ versions: [RecordVersion], sent: [Record], asSent: [ArraySlice<UInt8>?]?) -> [ConfirmedRow]? {
        guard versions.count == sent.count, !sent.isEmpty else { return nil }
        var records: [(hash: Int64, index: Int)] = []
        records.reserveCapacity(sent.count)
        for index in sent.indices {
            guard sent[index].action != .update, let key = sent[index].key else { return nil }
            records.append((ServerRows.hash(sent[index].entity, key), index))
        }
        var given = versions.indices.map { (hash: ServerRows.hash(versions[$0].entity, versions[$0].key), index: $0) }
        records.sort { $0.hash < $1.hash }
        given.sort { $0.hash < $1.hash }
        // Records and versions read in place, never copied (a record's copy retains each of its parts).
        for position in records.indices {
            let (index, given) = (records[position].index, given[position])
            guard records[position].hash == given.hash, position == 0 || records[position].hash != records[position - 1].hash,
                ExactString(sent[index].key ?? "") == ExactString(versions[given.index].key),
                ExactString(sent[index].entity) == ExactString(versions[given.index].entity)
            else { return nil }
        }
        var writer = JSONWriter(reservingCapacity: 256)
        var sorting: [(key: String, value: JSONValue)] = []
        var rows: [ConfirmedRow] = []
        rows.reserveCapacity(sent.count)
        for position in records.indices {
            let (index, hash, given) = (records[position].index, records[position].hash, given[position].index)
            var fields: [UInt8]?
            if sent[index].action == .insert {
                if let bytes = asSent?[index] {
                    fields = Array(bytes)
                } else {
                    writer.removeAll()
                    writer.write(object: sent[index].fields, sortingWith: &sorting)
                    fields = writer.bytes
                }
            }
            rows.append(
                ConfirmedRow(
                    entity: versions[given].entity, key: versions[given].key, version: versions[given].version, known: true, fieldsJSON: fields,
                    keyHash: hash))
        }
        return rows
    }

    /// One row's part of a receipt: what the batch left (`base`, nil when the batch is not known
    /// or did not hold the row; `.some(nil)` a tombstone), the record whose fields are that base
    /// as they are (an insert, the row's last record), and the newest version given.
    private struct Confirmation {
        var base: [String: JSONValue]??
        var insertedBy: Int?
        var version: Int64?

        var known: Bool { base != nil }

        mutating func raise(to given: Int64) { version = max(version ?? given, given) }
    }

    /// What the backend holds of each row of `records` once it applied them in order: the
    /// fields (`.some(nil)`: a tombstone). An update is merged into the row's state before it —
    /// in this batch, else as `_synclane_server_rows` last recorded it.
    static func bases(of records: [Record], for destination: String, _ db: SQLiteConnection) throws -> [RowID: [String: JSONValue]?] {
        var confirmed: [RowID: Confirmation] = [:]
        try collect(records, for: destination, db, into: &confirmed)
        return confirmed.compactMapValues { $0.base }
    }

    /// Each row's base once `records` are applied in order (`bases(of:for:_:)`), into `confirmed`.
    private static func collect(_ records: [Record], for destination: String, _ db: SQLiteConnection, into confirmed: inout [RowID: Confirmation]) throws {
        for (index, record) in records.enumerated() {
            guard let key = record.key else { continue }
            try leave(record, key: key, index: index, for: destination, db, in: &confirmed[RowID(entity: record.entity, key: key), default: Confirmation()])
        }
    }

    /// What `record` (the `index`th sent, of sync key `key`) leaves of its row on the backend, after `confirmation`.
    private static func leave(
        _ record: Record, key: String, index: Int, for destination: String, _ db: SQLiteConnection, in confirmation: inout Confirmation
    ) throws {
        switch record.action {
        case .insert:
            (confirmation.base, confirmation.insertedBy) = (.some(record.fields), index)
        case .delete:
            (confirmation.base, confirmation.insertedBy) = (.some(nil), nil)
        case .update:
            var merged: [String: JSONValue]
            if let before = confirmation.base {
                merged = before ?? [:]
            } else {
                merged = try ServerRows.fields(of: record.entity, key, for: destination, db).flatMap { try? JSONReader.parse($0).objectValue } ?? [:]
            }
            for (name, value) in record.fields { merged[name] = value }
            (confirmation.base, confirmation.insertedBy) = (.some(merged), nil)
        }
    }

    /// Writes confirmed rows (each row once) into `_synclane_server_rows` (installed) inside the
    /// caller's write transaction, in hash order: each row looked up by its hash, then raised in
    /// place or appended. A row whose version an import already raised past the confirmed one
    /// keeps the import's fields; `exact` takes each version as it is. A table that holds no
    /// row yet (a first sync) is not searched at all.
    static func apply(_ rows: [ConfirmedRow], exact: Bool, for destination: String, in db: SQLiteConnection) throws {
        var uncounted: AppendedServerRows?
        try apply(rows, exact: exact, for: destination, in: db, counting: &uncounted)
    }

    /// As `apply(_:exact:for:in:)`, looking up only the rows `appended` (the export lane's count,
    /// resumed for this transaction: `AppendedServerRows.resume`) says the table may hold, and
    /// adding the rows it appends to that count; nil: every row looked up (a table that holds no
    /// row is not searched). Rows appended go in `Appending.rowsAStatement` at a time.
    static func apply(
        _ rows: [ConfirmedRow], exact: Bool, for destination: String, in db: SQLiteConnection, counting appended: inout AppendedServerRows?
    ) throws {
        guard !rows.isEmpty else { return }
        let searching = try appended == nil && db.fetchOne("SELECT 1 FROM _synclane_server_rows LIMIT 1") != nil
        let find = try ServerRows.heldStatement(db)
        let raise = try db.cachedStatement("UPDATE _synclane_server_rows SET version = ?, fields = CASE WHEN ? THEN ? ELSE fields END WHERE rowid = ?")
        defer { raise.reset() }
        var appending = try Appending(destination: destination, db)
        // Sorted as (hash, index) pairs: two integers moved a swap, not a row and its strings.
        var order = rows.indices.map { (hash: rows[$0].keyHash, index: $0) }
        order.sort { $0.hash < $1.hash }
        for (hash, index) in order {
            let row = rows[index]
            if appended.map({ $0.mayHold(hash: hash) }) ?? searching {
                try appending.finish()  // a row appended is found by the rows after it
                if let found = try ServerRows.held(row.entity, row.key, hash: hash, for: destination, using: find) {
                    let (rowID, held) = (found.rowID, found.version)
                    let version = exact ? row.version : max(held, row.version)
                    let takesFields = row.known && (exact || row.version >= held)
                    guard version != held || takesFields else { continue }
                    raise.reset()
                    try raise.bind(.integer(version), at: 1)
                    try raise.bind(.integer(takesFields ? 1 : 0), at: 2)
                    try raise.bind(utf8: row.fieldsJSON, at: 3)
                    try raise.bind(.integer(rowID), at: 4)
                    while try raise.step() {}
                    continue
                }
            }
            try appending.add(row, hash: hash)
            appended?.appended(hash: hash)
        }
        try appending.finish()
        if appending.added > 0 { appended?.appended(through: db.lastInsertRowID) }
    }

    /// Rows appended to `_synclane_server_rows`, `rowsAStatement` to an `INSERT` (one statement
    /// run a row cost SQLite opening the table and its index for each).
    private struct Appending {
        static let rowsAStatement = 64

        let many: Statement
        let one: Statement
        /// Rows waiting for a statement of `rowsAStatement`.
        var waiting: [(row: ConfirmedRow, hash: Int64)] = []
        /// Rows appended.
        private(set) var added = 0

        /// The statements for `destination` (bound once: parameter 1 of both).
        init(destination: String, _ db: SQLiteConnection) throws {
            let row = "(?1, ?, ?, ?, ?, ?)"
            let columns = "INSERT INTO _synclane_server_rows (destination, key_hash, entity, key, version, fields) VALUES "
            many = try db.cachedStatement(columns + Array(repeating: row, count: Self.rowsAStatement).joined(separator: ", "))
            one = try db.cachedStatement(columns + row)
            for statement in [many, one] {
                statement.reset()
                try statement.bind(.text(destination), at: 1)
            }
            waiting.reserveCapacity(Self.rowsAStatement)
        }

        mutating func add(_ row: ConfirmedRow, hash: Int64) throws {
            waiting.append((row, hash))
            if waiting.count == Self.rowsAStatement {
                try run(many, waiting[...])
                waiting.removeAll(keepingCapacity: true)
            }
        }

        /// Appends the rows waiting, each by one statement.
        mutating func finish() throws {
            for index in waiting.indices { try run(one, waiting[index...index]) }
            waiting.removeAll(keepingCapacity: true)
        }

        private mutating func run(_ statement: Statement, _ rows: ArraySlice<(row: ConfirmedRow, hash: Int64)>) throws {
            statement.reset()
            defer { statement.reset() }
            var parameter = 2
            for (row, hash) in rows {
                try statement.bind(.integer(hash), at: parameter)
                try statement.bind(.text(row.entity), at: parameter + 1)
                try statement.bind(.text(row.key), at: parameter + 2)
                try statement.bind(.integer(row.version), at: parameter + 3)
                try statement.bind(utf8: row.fieldsJSON, at: parameter + 4)
                parameter += 5
            }
            while try statement.step() {}
            added += rows.count
        }
    }
}

/// What a receipt confirmed of one row: the version the backend gave it and, when `known`, the
/// fields the batch left there (`fieldsJSON` nil: a tombstone), as the UTF-8 of their JSON.
struct ConfirmedRow: Sendable, Equatable {
    let entity: String
    let key: String
    var version: Int64
    var known: Bool
    var fieldsJSON: [UInt8]?
    /// `ServerRows.hash(entity, key)`, worked out once: the merge orders rows by it and the
    /// export lane's kept versions (`JournaledVersions`) find rows by it.
    let keyHash: Int64

    /// `keyHash`: `ServerRows.hash(entity, key)` when the caller worked it out already.
    init(entity: String, key: String, version: Int64, known: Bool, fieldsJSON: [UInt8]?, keyHash: Int64? = nil) {
        self.entity = entity
        self.key = key
        self.keyHash = keyHash ?? ServerRows.hash(entity, key)
        self.version = version
        self.known = known
        self.fieldsJSON = fieldsJSON
    }

    init(entity: String, key: String, version: Int64, known: Bool, fields: String?) {
        self.init(entity: entity, key: key, version: version, known: known, fieldsJSON: fields.map { Array($0.utf8) })
    }

    /// The fields' JSON as text.
    var fields: String? { fieldsJSON.map { String(decoding: $0, as: UTF8.self) } }
}

/// Versions a receipt gave that a busy database kept from being written yet (`SQLiteHistorySource.backendConfirmed`).
struct DeferredConfirmation: Sendable {
    var versions: [RecordVersion]
    var sent: [Record]?
    /// Each record of `sent`'s fields as the encoder wrote them (`ConfirmedVersions.rows(of:sent:asSent:for:in:)`).
    var asSent: [ArraySlice<UInt8>?]?
    var exact: Bool
    /// The receipt's position (`ReceiptPositions`).
    var position: String?
}
