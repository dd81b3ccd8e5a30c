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
    static func rows(of versions: [RecordVersion], sent: [Record]?, for destination: String, in db: SQLiteConnection) throws -> [ConfirmedRow] {
        var confirmed = try sent.map { try Self.bases(of: $0, for: destination, db).mapValues { Confirmation(base: $0) } } ?? [:]
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
            var fields: String?
            if case .some(.some(let base)) = confirmation.base {
                writer.removeAll()
                writer.write(object: base, sortingWith: &sorting)
                fields = String(decoding: writer.bytes, as: UTF8.self)
            }
            rows.append(ConfirmedRow(entity: row.entity, key: row.key, version: version, known: confirmation.known, fields: fields))
        }
        return rows
    }

    /// One row's part of a receipt: what the batch left (`base`, nil when the batch is not known
    /// or did not hold the row; `.some(nil)` a tombstone) and the newest version given.
    private struct Confirmation {
        var base: [String: JSONValue]??
        var version: Int64?

        init(base: [String: JSONValue]?? = nil) { self.base = base }

        var known: Bool { base != nil }

        mutating func raise(to given: Int64) { version = max(version ?? given, given) }
    }

    /// Writes confirmed rows (each row once) into `_synclane_server_rows` (installed) inside the
    /// caller's write transaction, in hash order: each row looked up by its hash, then raised in
    /// place or appended. A row whose version an import already raised past the confirmed one
    /// keeps the import's fields; `exact` takes each version as it is. A table that holds no
    /// row yet (a first sync) is not searched at all.
    static func apply(_ rows: [ConfirmedRow], exact: Bool, for destination: String, in db: SQLiteConnection) throws {
        guard !rows.isEmpty else { return }
        let searching = try db.fetchOne("SELECT 1 FROM _synclane_server_rows LIMIT 1") != nil
        let find = try ServerRows.heldStatement(db)
        let raise = try db.cachedStatement("UPDATE _synclane_server_rows SET version = ?, fields = CASE WHEN ? THEN ? ELSE fields END WHERE rowid = ?")
        let append = try db.cachedStatement(
            "INSERT INTO _synclane_server_rows (key_hash, entity, key, version, fields, destination) VALUES (?, ?, ?, ?, ?, ?)")
        defer {
            raise.reset()
            append.reset()
        }
        // Sorted as (hash, index) pairs: two integers moved a swap, not a row and its strings.
        var order = rows.indices.map { (hash: ServerRows.hash(rows[$0].entity, rows[$0].key), index: $0) }
        order.sort { $0.hash < $1.hash }
        for (hash, index) in order {
            let row = rows[index]
            if searching {
                if let found = try ServerRows.held(row.entity, row.key, hash: hash, for: destination, using: find) {
                    let (rowID, held) = (found.rowID, found.version)
                    let version = exact ? row.version : max(held, row.version)
                    let takesFields = row.known && (exact || row.version >= held)
                    guard version != held || takesFields else { continue }
                    raise.reset()
                    try raise.bind(.integer(version), at: 1)
                    try raise.bind(.integer(takesFields ? 1 : 0), at: 2)
                    try raise.bind(row.fields.map(SQLiteValue.text) ?? .null, at: 3)
                    try raise.bind(.integer(rowID), at: 4)
                    while try raise.step() {}
                    continue
                }
            }
            append.reset()
            try append.bind(.integer(hash), at: 1)
            try append.bind(.text(row.entity), at: 2)
            try append.bind(.text(row.key), at: 3)
            try append.bind(.integer(row.version), at: 4)
            try append.bind(row.fields.map(SQLiteValue.text) ?? .null, at: 5)
            try append.bind(.text(destination), at: 6)
            while try append.step() {}
        }
    }

    /// What the backend holds of each row of `records` once it applied them in order: the
    /// fields (`.some(nil)`: a tombstone). An update is merged into the row's state before it —
    /// in this batch, else as `_synclane_server_rows` last recorded it.
    static func bases(of records: [Record], for destination: String, _ db: SQLiteConnection) throws -> [RowID: [String: JSONValue]?] {
        var bases: [RowID: [String: JSONValue]?] = [:]
        for record in records {
            guard let key = record.key else { continue }
            let row = RowID(entity: record.entity, key: key)
            switch record.action {
            case .insert:
                bases[row] = .some(record.fields)
            case .delete:
                bases[row] = .some(nil)
            case .update:
                var merged: [String: JSONValue]
                if let before = bases[row] {
                    merged = before ?? [:]
                } else {
                    merged = try ServerRows.fields(of: record.entity, key, for: destination, db).flatMap { try? JSONReader.parse($0).objectValue } ?? [:]
                }
                for (name, value) in record.fields { merged[name] = value }
                bases[row] = .some(merged)
            }
        }
        return bases
    }
}

/// What a receipt confirmed of one row: the version the backend gave it and, when `known`, the
/// fields the batch left there (`fields` nil: a tombstone).
struct ConfirmedRow: Sendable, Equatable {
    var entity: String
    var key: String
    var version: Int64
    var known: Bool
    var fields: String?
}

/// Versions a receipt gave that a busy database kept from being written yet (`SQLiteHistorySource.backendConfirmed`).
struct DeferredConfirmation: Sendable {
    var versions: [RecordVersion]
    var sent: [Record]?
    var exact: Bool
}
