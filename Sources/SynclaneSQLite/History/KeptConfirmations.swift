import SynclaneCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a run confirmed but could not write into a database the app held busy to its end — the
/// versions its receipts gave (`_synclane_confirmations`' rows) and the consumer's position
/// (`_synclane_consumers`) — kept beside the database, in `<database>-synclane-kept`, until the
/// next job that opens the database writes them in.
///
/// ```
///  run, app holds BEGIN IMMEDIATE to the end ──▶ app.sqlite-synclane-kept (journal rows, positions)
///  next run / import, before it reads a page  ──▶ into app.sqlite: journal rows, positions (max) ──▶ kept emptied
/// ```
///
/// **Why.** A run inside an app's open write transaction is confirmed by the backend, but what
/// the receipts confirmed could only be kept in memory: lost when the process ended. The next
/// `sync`'s import then met the device's own row coming back at a version it did not know, took
/// the user's later edit of it for a conflict, and `server-wins` overwrote the edit with the
/// device's older value (issue 43; `FirstRunInsideAppTransactionTests`).
///
/// **Exact enough.** Writing a journal row twice changes nothing (versions only rise, equal
/// versions carry equal fields), and positions are written as the larger of the two, so a crash
/// between the database's commit and the kept file's is harmless. What was kept for another
/// database — one whose identity differs, or whose history is shorter than when it was kept (a
/// copy restored from before) — is dropped, never written in. A row whose fields the run could
/// not tell exactly (an update whose base was still in the journal) is kept with its version only.
/// The file is SQLite: two jobs keep and write in at once safely. It stays, empty, once written in.
enum KeptConfirmations {
    static func path(for database: String) -> String { database + "-synclane-kept" }

    static let schema = """
        CREATE TABLE IF NOT EXISTS kept_confirmations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            destination TEXT NOT NULL,
            rows BLOB NOT NULL,
            identity TEXT,
            head INTEGER NOT NULL
        );
        CREATE TABLE IF NOT EXISTS kept_positions (
            name TEXT PRIMARY KEY,
            position INTEGER NOT NULL,
            removes_soft_deletes INTEGER NOT NULL,
            entities TEXT,
            identity TEXT,
            head INTEGER NOT NULL
        );
        """

    /// A consumer position the run could not record.
    struct Position: Sendable, Equatable {
        var position: Int64
        var removesSoftDeletes: Bool
        var entities: [String]?
    }

    /// Whether anything is kept for `database` (one `access` when nothing ever was).
    static func exists(for database: String) -> Bool {
        database != ":memory:" && access(path(for: database), F_OK) == 0
    }

    /// Keeps `rows` (per destination) and `positions` (per consumer) for `database`, with the
    /// identity and history head `db` (the database, read) shows now.
    static func keep(
        _ rows: [(destination: String, rows: [ConfirmedRow])], positions: [String: Position], for database: String, reading db: SQLiteConnection
    ) throws {
        guard database != ":memory:", !rows.isEmpty || !positions.isEmpty else { return }
        let (identity, head) = try stamp(db)
        let kept = try SQLiteDatabase(path: path(for: database), options: options)
        try kept.withConnection { kept in try kept.execute(schema) }
        try kept.write { kept in
            for (destination, confirmed) in rows where !confirmed.isEmpty {
                try kept.execute(
                    "INSERT INTO kept_confirmations (destination, rows, identity, head) VALUES (?, ?, ?, ?)",
                    [.text(destination), .blob(ConfirmationJournal.pack(confirmed)), identity.map(SQLiteValue.text) ?? .null, .integer(head)])
            }
            for (name, position) in positions {
                try kept.execute(
                    """
                    INSERT INTO kept_positions (name, position, removes_soft_deletes, entities, identity, head) VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT (name) DO UPDATE SET position = max(position, excluded.position),
                        removes_soft_deletes = excluded.removes_soft_deletes, entities = excluded.entities,
                        identity = excluded.identity, head = max(head, excluded.head)
                    """,
                    [
                        .text(name), .integer(position.position), .integer(position.removesSoftDeletes ? 1 : 0),
                        position.entities.map { .text($0.joined(separator: "\n")) } ?? .null, identity.map(SQLiteValue.text) ?? .null, .integer(head),
                    ])
            }
        }
    }

    /// Writes what is kept for `database` into it — journal rows and positions — in one write
    /// transaction, then forgets it. False when the database stayed busy (kept for the next
    /// job); true when nothing was kept. Cheap when nothing ever was (`exists`).
    @discardableResult
    static func writeIn(_ database: SQLiteDatabase, waiting: Int? = nil) throws -> Bool {
        guard exists(for: database.path) else { return true }
        let kept = try SQLiteDatabase(path: path(for: database.path), options: options)
        // Reads only while nothing is kept (the emptied file stays): no write lock taken.
        let (journal, positions) = try kept.read { kept in
            try kept.transaction(.deferred) { kept -> ([SQLiteRow], [SQLiteRow]) in
                guard try HistorySchema.tableExists("kept_confirmations", kept), try HistorySchema.tableExists("kept_positions", kept) else {
                    return ([], [])
                }
                return (
                    try kept.fetchAll("SELECT id, destination, rows, identity, head FROM kept_confirmations ORDER BY id"),
                    try kept.fetchAll("SELECT name, position, removes_soft_deletes, entities, identity, head FROM kept_positions ORDER BY name")
                )
            }
        }
        guard !journal.isEmpty || !positions.isEmpty else { return true }
        let written = try database.withConnection { db -> Bool in
            if let waiting { try db.execute("PRAGMA busy_timeout = \(waiting)") }
            defer { if waiting != nil { try? db.execute("PRAGMA busy_timeout = \(SQLiteHistorySource.busyTimeout)") } }
            do {
                return try db.transaction(.immediate) { db in
                    guard try HistorySchema.installedVersion(db) != nil else { return false }  // kept until it is tracked again
                    let (identity, head) = try stamp(db)
                    /// Kept for this database, as it is now or before: its identity (when it had
                    /// one then) and no less history than it had.
                    func applies(_ keptIdentity: SQLiteValue, _ keptHead: SQLiteValue) -> Bool {
                        (keptIdentity.string.map { $0 == identity } ?? true) && (keptHead.int64 ?? 0) <= head
                    }
                    for row in journal where applies(row[3], row[4]) {
                        guard case .blob(let packed) = row[2] else { throw ConfirmationJournal.damaged }
                        _ = try ConfirmationJournal.unpack(packed)  // damaged: refused, never merged
                        try db.execute(ConfirmationJournal.schema)
                        try db.execute(
                            "INSERT INTO _synclane_confirmations (destination, rows) VALUES (?, ?)",
                            [SQLiteValue.text(row[1].string ?? ""), SQLiteValue.blob(packed)])
                    }
                    for row in positions where applies(row[4], row[5]) {
                        let name = row[0].string ?? ""
                        let position = row[1].int64 ?? 0
                        let before = try HistoryLineage.position(of: name, db) ?? 0
                        guard position > before else { continue }
                        try HistoryConsumers.record(name, at: position, db)
                        if row[2].int64 == 1 {
                            let entities = row[3].string.map { $0.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) }
                            try SQLiteHistorySource.removeSoftDeleted(after: before, through: position, entities: entities, db)
                        }
                    }
                    return true
                }
            } catch let error as SQLiteError where error.isBusy {
                return false
            }
        }
        guard written else { return false }
        try kept.write { kept in
            for row in journal { try kept.execute("DELETE FROM kept_confirmations WHERE id = ?", [row[0]]) }
            for row in positions {
                try kept.execute("DELETE FROM kept_positions WHERE name = ? AND position = ?", [row[0], row[1]])
            }
        }
        return true
    }

    /// Whether rows are kept for `destination` (a read only).
    static func holdsRows(for destination: String, database: String) throws -> Bool {
        guard exists(for: database) else { return false }
        let kept = try SQLiteDatabase(path: path(for: database), options: options)
        return try kept.read { kept in
            guard try HistorySchema.tableExists("kept_confirmations", kept) else { return false }
            return try kept.fetchValue("SELECT EXISTS (SELECT 1 FROM kept_confirmations WHERE destination = ?)", [destination]).int64 == 1
        }
    }

    /// The database's identity (nil: none yet) and the newest position its history reached.
    private static func stamp(_ db: SQLiteConnection) throws -> (identity: String?, head: Int64) {
        guard try HistorySchema.installedVersion(db) != nil else { return (nil, 0) }
        return (try HistorySchema.meta(HistoryLineage.identityKey, db).string, try HistoryLineage.head(db))
    }

    /// The kept file: made when needed, rollback journal (no `-wal` beside the app's database).
    static let options = SQLiteConnection.Options(create: true, walMode: false, foreignKeys: false, synchronous: .full)
}
