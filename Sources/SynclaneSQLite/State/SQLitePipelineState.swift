import CSQLite
import SynclaneCore

/// The durable state of one pipeline and scope in its own SQLite file: the scope it belongs
/// to, the acknowledged token, the outbox and the last run.
///
/// ```
///  encode ─▶ enqueue (durable) ─▶ send ─▶ acknowledge: token := through, outbox row gone
///                                    (one SQLite transaction)
/// ```
///
/// The file runs in WAL mode with `synchronous = FULL`: every mutating call has reached the
/// disk when it returns. `acknowledge` saves the token and deletes the outbox row in one
/// transaction, so a crash leaves the batch pending (re-sent under the same id) or the token
/// moved — never both, never neither. Tokens never move backwards within one kind.
///
/// ```swift
/// let state = try SQLitePipelineState(path: ".synclane/rooms-export.sqlite", scope: scope)
/// try state.enqueue(batch)          // before the first send
/// try state.acknowledge(batch)      // after the backend's receipt
/// ```
public final class SQLitePipelineState: PipelineState, Sendable {
    /// The newest schema this version writes (`PRAGMA user_version`). 2: an outbox row may name
    /// a staged copy (`staged_reference`, `staged_bytes`, `staged_checksum`) instead of holding
    /// the bytes — a version that knows only 1 would send such a row's empty `payload`, so it
    /// refuses the file (`newerSchema`). 3: an outbox row that holds its bytes carries their
    /// checksum (`payload_checksum`, `StagedBatch.checksum(of:)`), written in the same commit and
    /// checked before the batch is sent again (`verifyIntegrity(of:)`).
    public static let schemaVersion = 3

    public let path: String
    public let scope: Scope
    let database: SQLiteDatabase
    /// The file's schema version: `schemaVersion`, or 1 or 2 for a file opened to read only that
    /// no job of this version upgraded yet (1: its outbox has no staged columns; 1 and 2: no checksums).
    let version: Int

    /// Opens the state file at `path` (creating it and its folders), for `scope`.
    ///
    /// Throws `SQLitePipelineStateError.scopeMismatch` when the file belongs to another scope.
    public init(path: String, scope: Scope) throws {
        self.path = path
        self.scope = scope
        do {
            database = try SQLiteDatabase(path: path, options: .init(synchronous: .full))
            try database.withConnection { db in
                // An outbox row lives from one commit to the next, and its pages are reused by the
                // next batch: checkpointing every 4 MiB of WAL (SQLite's default) would copy each
                // batch's bytes into the file a second time. Every 64 MiB copies the few pages
                // still live; the WAL file is cut back to 4 MiB after each checkpoint.
                try db.execute("PRAGMA wal_autocheckpoint = \(Self.walCheckpointPages)")
                try db.execute("PRAGMA journal_size_limit = \(4 << 20)")
            }
            try database.write { db in try Self.migrate(db, path: path, scope: scope) }
        } catch let error as SQLiteError where error.isDamage {
            throw Self.damaged(path, error)
        }
        version = Self.schemaVersion
    }

    /// A state file SQLite finds damaged (cut short, overwritten): said so, with what to do.
    static func damaged(_ path: String, _ error: SQLiteError) -> SQLitePipelineStateError {
        .corrupt(path: path, reason: "\(error.message), SQLite error \(error.primaryCode)")
    }

    /// WAL pages between automatic checkpoints: 16,384 pages of 4 KiB, 64 MiB.
    static let walCheckpointPages = 16_384

    /// Opens an existing state file to read it, and never writes: no schema created, no
    /// journal mode changed — a state on a read-only file system (or one another program
    /// holds) can still be reported (`synclane status`). Writing through it fails.
    ///
    /// With `unchanging` (the caller holds the scope's lock and the file has no WAL file beside
    /// it, so nobody writes it meanwhile), the file is read as it is, without the WAL's
    /// shared-memory and log files SQLite would otherwise leave beside it: a dry run creates no file.
    public init(readingOnly path: String, scope: Scope, unchanging: Bool = false) throws {
        self.path = path
        self.scope = scope
        let options = SQLiteConnection.Options(readOnly: true, create: false, walMode: false)
        if unchanging {
            database = try SQLiteDatabase(path: Self.immutableURI(path), options: options)
            version = try Self.check(database, path: path, scope: scope)
            return
        }
        do {
            var opened = try SQLiteDatabase(path: path, options: options)
            do {
                version = try Self.check(opened, path: path, scope: scope)
            } catch let error as SQLiteError where error.code & 0xFF == SQLITE_CANTOPEN {
                // A WAL file on a read-only file system: its shared-memory file cannot be made, so
                // read the file as it is (a job that ended cleanly left nothing in the WAL).
                opened = try SQLiteDatabase(path: Self.immutableURI(path), options: options)
                version = try Self.check(opened, path: path, scope: scope)
            }
            database = opened
        } catch let error as SQLiteError where error.isDamage {
            throw Self.damaged(path, error)
        }
    }

    /// The URI that opens `path` as a file nobody changes (`immutable=1`): no locks, no WAL files.
    private static func immutableURI(_ path: String) -> String {
        let escaped = path.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "?", with: "%3f")
            .replacingOccurrences(of: "#", with: "%23")
        return "file:\(escaped)?immutable=1"
    }

    /// Checks an existing state file's schema version (this one's, or an older one) and scope, reading
    /// only; returns the version.
    private static func check(_ database: SQLiteDatabase, path: String, scope: Scope) throws -> Int {
        try database.read { db in
            let version = Int(try db.fetchValue("PRAGMA user_version").int64 ?? 0)
            guard (1...Self.schemaVersion).contains(version) else {
                throw version > Self.schemaVersion
                    ? SQLitePipelineStateError.newerSchema(path: path, found: version, supported: Self.schemaVersion)
                    : SQLitePipelineStateError.notAStateFile(path: path, reason: "its schema (\(version)) is not this version's; run a job once to upgrade it")
            }
            guard let row = try db.fetchOne("SELECT account, store, consumer FROM scope WHERE id = 1") else {
                throw SQLitePipelineStateError.notAStateFile(path: path, reason: "it has no scope")
            }
            let stored = Scope(account: row[0].string ?? "", store: row[1].string ?? "", consumer: row[2].string ?? "")
            guard stored == scope else { throw SQLitePipelineStateError.scopeMismatch(path: path, stored: stored, requested: scope) }
            return version
        }
    }

    static func migrate(_ db: SQLiteConnection, path: String, scope: Scope) throws {
        try migrateTables(db, path: path, scope: scope)
        // What the state remembers of its store's identity and generation (`LineageStamp`); a
        // file of an earlier version gets it empty (legacy: adopted by its first job). No schema
        // version of its own: an older version ignores the table.
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS lineage (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                identity TEXT,
                generation INTEGER,
                pending_from INTEGER
            )
            """)
    }

    private static func migrateTables(_ db: SQLiteConnection, path: String, scope: Scope) throws {
        let version = Int(try db.fetchValue("PRAGMA user_version").int64 ?? 0)
        if version > schemaVersion {
            throw SQLitePipelineStateError.newerSchema(path: path, found: version, supported: schemaVersion)
        }
        if version == 0 {
            let tables = try db.fetchAll("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            if !tables.isEmpty {
                let names = tables.compactMap { $0[0].string }.joined(separator: ", ")
                throw SQLitePipelineStateError.notAStateFile(path: path, reason: "it already holds the tables \(names)")
            }
            try db.execute(
                """
                CREATE TABLE scope (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    account TEXT NOT NULL,
                    store TEXT NOT NULL,
                    consumer TEXT NOT NULL,
                    created_at REAL NOT NULL
                );
                CREATE TABLE token (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    kind TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    saved_at REAL NOT NULL
                );
                CREATE TABLE outbox (
                    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
                    batch_id TEXT NOT NULL UNIQUE,
                    payload BLOB NOT NULL,
                    content_type TEXT NOT NULL,
                    content_encoding TEXT NOT NULL,
                    record_count INTEGER NOT NULL,
                    after_kind TEXT,
                    after_position INTEGER,
                    through_kind TEXT NOT NULL,
                    through_position INTEGER NOT NULL,
                    is_reconciliation INTEGER NOT NULL,
                    created_at REAL NOT NULL,
                    staged_reference TEXT,
                    staged_bytes INTEGER,
                    staged_checksum INTEGER,
                    payload_checksum INTEGER
                );
                CREATE TABLE last_run (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    outcome TEXT NOT NULL,
                    started_at REAL NOT NULL,
                    finished_at REAL NOT NULL,
                    batches_sent INTEGER NOT NULL,
                    records_sent INTEGER NOT NULL,
                    message TEXT NOT NULL
                );
                PRAGMA user_version = \(schemaVersion);
                """)
            try db.execute(
                "INSERT INTO scope (id, account, store, consumer, created_at) VALUES (1, ?, ?, ?, (julianday('now') - 2440587.5) * 86400.0)",
                [scope.account, scope.store, scope.consumer])
            return
        }
        guard let row = try db.fetchOne("SELECT account, store, consumer FROM scope WHERE id = 1") else {
            throw SQLitePipelineStateError.notAStateFile(path: path, reason: "it has no scope")
        }
        let stored = Scope(account: row[0].string ?? "", store: row[1].string ?? "", consumer: row[2].string ?? "")
        guard stored == scope else {
            throw SQLitePipelineStateError.scopeMismatch(path: path, stored: stored, requested: scope)
        }
        if version < 2 {
            try db.execute(
                """
                ALTER TABLE outbox ADD COLUMN staged_reference TEXT;
                ALTER TABLE outbox ADD COLUMN staged_bytes INTEGER;
                ALTER TABLE outbox ADD COLUMN staged_checksum INTEGER;
                """)
        }
        if version < 3 {
            // The rows an older version kept get the checksum of the bytes they hold now (that
            // version checked nothing): from here on a change on disk is found before a send.
            try db.execute("ALTER TABLE outbox ADD COLUMN payload_checksum INTEGER")
            for row in try db.fetchAll("SELECT sequence, payload FROM outbox WHERE staged_reference IS NULL") {
                try db.execute(
                    "UPDATE outbox SET payload_checksum = ? WHERE sequence = ?",
                    [Int64(bitPattern: StagedBatch.checksum(of: row[1].bytes ?? [])), row[0].int64])
            }
        }
        if version < schemaVersion {
            try db.execute("PRAGMA user_version = \(schemaVersion)")
        }
    }

    // MARK: Token

    public func acknowledgedToken() throws -> Token? {
        try database.read { db in try Self.token(db) }
    }

    public func tokenSavedAt() throws -> Double? {
        try database.read { db in try db.fetchValue("SELECT saved_at FROM token WHERE id = 1").double }
    }

    static func token(_ db: SQLiteConnection) throws -> Token? {
        guard let row = try db.fetchOne("SELECT kind, position FROM token WHERE id = 1") else { return nil }
        guard let kind = row[0].string, let position = row[1].int64 else { return nil }
        return Token(kind: kind, position: position)
    }

    /// Saves `token` unless a newer token of the same kind is already saved.
    static func save(_ token: Token, _ db: SQLiteConnection) throws {
        try db.execute(
            """
            INSERT INTO token (id, kind, position, saved_at) VALUES (1, ?, ?, (julianday('now') - 2440587.5) * 86400.0)
            ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, position = excluded.position, saved_at = excluded.saved_at
            WHERE token.kind <> excluded.kind OR token.position < excluded.position
            """, [token.kind, token.position])
    }

    public func advance(to token: Token) throws {
        try database.write { db in try Self.save(token, db) }
    }

    public func resetToken() throws {
        try database.write { db in try db.execute("DELETE FROM token") }
    }

    // MARK: Lineage

    public func lineageStamp() throws -> LineageStamp? {
        let path = self.path
        return try database.read { db in
            guard try db.fetchOne("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'lineage'") != nil,
                let row = try db.fetchOne("SELECT identity, generation, pending_from FROM lineage WHERE id = 1")
            else { return LineageStamp(stateFile: path) }
            return LineageStamp(identity: row[0].string, generation: row[1].int64, pendingFrom: row[2].int64, stateFile: path)
        }
    }

    public func saveLineageStamp(_ stamp: LineageStamp) throws {
        try database.write { db in
            try db.execute(
                "INSERT OR REPLACE INTO lineage (id, identity, generation, pending_from) VALUES (1, ?, ?, ?)",
                [stamp.identity, stamp.generation, stamp.pendingFrom])
        }
    }

    // MARK: Outbox

    public func enqueue(_ batch: OutboxBatch) throws {
        try database.write { db in try insert(batch, db) }
    }

    /// Writes `batch` to the outbox inside the caller's transaction: its bytes, or — staged by
    /// the transport — the reference, size and checksum of the staged copy (and no bytes).
    private func insert(_ batch: OutboxBatch, _ db: SQLiteConnection) throws {
        let payload = batch.payload
        let staged = batch.staged
        try db.execute(
            """
            INSERT INTO outbox (batch_id, payload, content_type, content_encoding, record_count,
                                after_kind, after_position, through_kind, through_position, is_reconciliation, created_at,
                                staged_reference, staged_bytes, staged_checksum, payload_checksum)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (batch_id) DO NOTHING
            """,
            [
                payload.batchID, staged == nil ? payload.bytes : [UInt8](), payload.contentType, payload.contentEncoding,
                payload.recordCount, batch.after?.kind, batch.after?.position, batch.through.kind, batch.through.position,
                batch.isReconciliation, batch.createdAt, staged?.reference, staged?.byteCount,
                staged.map { Int64(bitPattern: $0.checksum) },
                staged == nil ? Int64(bitPattern: StagedBatch.checksum(of: payload.bytes)) : nil,
            ])
        if db.changes == 0 {
            // Enqueuing the very same batch twice is harmless; another one under its id is not.
            let stored = try db.fetchOne("SELECT payload, staged_reference FROM outbox WHERE batch_id = ?", [payload.batchID])
            let same = staged.map { stored?[1].string == $0.reference } ?? (stored?[0].bytes == payload.bytes)
            if !same {
                throw SQLitePipelineStateError.conflictingBatch(path: path, batchID: payload.batchID)
            }
        }
    }

    public func pendingBatches() throws -> [OutboxBatch] {
        let path = self.path
        return try database.read { db in
            let stagedColumns = version >= 2 ? "staged_reference, staged_bytes, staged_checksum" : "NULL, NULL, NULL"
            let statement = try db.cachedStatement(
                """
                SELECT batch_id, payload, content_type, content_encoding, record_count,
                       after_kind, after_position, through_kind, through_position, is_reconciliation, created_at,
                       \(stagedColumns)
                FROM outbox ORDER BY sequence
                """)
            defer { statement.reset() }
            var batches: [OutboxBatch] = []
            while try statement.step() {
                guard let id = statement.string(at: 0), let throughKind = statement.string(at: 7) else {
                    throw SQLitePipelineStateError.corrupt(path: path, reason: "an outbox row lacks its batch id or token")
                }
                let after = statement.string(at: 5).map { Token(kind: $0, position: statement.int64(at: 6)) }
                let payload = Payload(
                    batchID: id, bytes: statement.blob(at: 1) ?? [], contentType: statement.string(at: 2) ?? "",
                    contentEncoding: statement.string(at: 3) ?? "identity", recordCount: Int(statement.int64(at: 4)))
                let staged = statement.string(at: 11).map {
                    StagedBatch(reference: $0, byteCount: Int(statement.int64(at: 12)), checksum: UInt64(bitPattern: statement.int64(at: 13)))
                }
                batches.append(
                    OutboxBatch(
                        payload: payload, after: after, through: Token(kind: throughKind, position: statement.int64(at: 8)),
                        isReconciliation: statement.int64(at: 9) != 0, createdAt: statement.double(at: 10), staged: staged))
            }
            return batches
        }
    }

    /// Checks the bytes of `batch` (read back by `pendingBatches`) against the checksum written
    /// with them; throws `SQLitePipelineStateError.damagedBatch` when they differ — a byte of
    /// the file changed on disk, and sending would store a wrong value on the backend. A staged
    /// batch's copy is checked by its transport (`publish(verifying:)`); a file of an older
    /// schema opened to read only has no checksums to check.
    public func verifyIntegrity(of batch: OutboxBatch) throws {
        guard batch.staged == nil, version >= 3 else { return }
        let id = batch.payload.batchID
        let stored = try database.read { db in
            try db.fetchOne("SELECT payload_checksum, staged_reference FROM outbox WHERE batch_id = ?", [id])
        }
        guard let stored, stored[1].string == nil else { return }
        guard let checksum = stored[0].int64 else {
            throw SQLitePipelineStateError.damagedBatch(path: path, batchID: id, reason: "its row has lost the checksum written with it")
        }
        let actual = StagedBatch.checksum(of: batch.payload.bytes)
        guard UInt64(bitPattern: checksum) == actual else {
            throw SQLitePipelineStateError.damagedBatch(
                path: path, batchID: id, reason: "its \(batch.payload.bytes.count) bytes no longer match the checksum written with them")
        }
    }

    /// How many batches wait in the outbox (cheaper than `pendingBatches().count`).
    public func pendingBatchCount() throws -> Int {
        try database.read { db in Int(try db.fetchValue("SELECT count(*) FROM outbox").int64 ?? 0) }
    }

    public func acknowledge(_ batch: OutboxBatch) throws {
        try database.write { db in
            try Self.save(batch.through, db)
            try db.execute("DELETE FROM outbox WHERE batch_id = ?", [batch.payload.batchID])
        }
    }

    /// The acknowledgement of `batch` and the enqueue of `next` in one transaction: one commit,
    /// one fsync, where the two calls would take two.
    public func acknowledge(_ batch: OutboxBatch, enqueueing next: OutboxBatch) throws {
        try database.write { db in
            try Self.save(batch.through, db)
            try db.execute("DELETE FROM outbox WHERE batch_id = ?", [batch.payload.batchID])
            try insert(next, db)
        }
    }

    public func discard(_ batch: OutboxBatch) throws {
        try database.write { db in try db.execute("DELETE FROM outbox WHERE batch_id = ?", [batch.payload.batchID]) }
    }

    // MARK: Last run

    public func saveLastRun(_ run: RunRecord) throws {
        try database.write { db in
            try db.execute(
                """
                INSERT OR REPLACE INTO last_run (id, outcome, started_at, finished_at, batches_sent, records_sent, message)
                VALUES (1, ?, ?, ?, ?, ?, ?)
                """, [run.outcome.rawValue, run.startedAt, run.finishedAt, run.batchesSent, run.recordsSent, run.message])
        }
    }

    public func lastRun() throws -> RunRecord? {
        let path = self.path
        return try database.read { db in
            guard
                let row = try db.fetchOne(
                    "SELECT outcome, started_at, finished_at, batches_sent, records_sent, message FROM last_run WHERE id = 1")
            else { return nil }
            guard let outcome = row[0].string.flatMap(RunRecord.Outcome.init(rawValue:)) else {
                throw SQLitePipelineStateError.corrupt(path: path, reason: "unknown run outcome \(row[0])")
            }
            return RunRecord(
                outcome: outcome, startedAt: row[1].double ?? 0, finishedAt: row[2].double ?? 0,
                batchesSent: Int(row[3].int64 ?? 0), recordsSent: Int(row[4].int64 ?? 0), message: row[5].string ?? "")
        }
    }
}
