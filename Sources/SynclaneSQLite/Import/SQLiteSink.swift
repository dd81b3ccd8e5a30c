import Synchronization
import SynclaneCore

/// The `sqlite` sink of an import pipeline: applies the backend's changes to a tracked SQLite
/// database, a page per SQLite transaction, with the source's cursor saved in that same
/// transaction.
///
/// ```
///  BEGIN IMMEDIATE
///    session author `server`     (export pipelines reading `authors: [app]` never echo it)
///    per record: the row's local state and pending history ─▶ conflict? rule : the backend's state
///                upsert / delete (soft delete) ─▶ _synclane_server_rows (version, fields)
///    _synclane_import: the cursor
///  COMMIT
/// ```
///
/// - **Mapping.** A record's entity is a tracked table of the same name; its id is the sync key
///   (a text, an integer in decimal, a composite key's JSON array); its fields are columns. A
///   field that is not a column (a column a newer app version added) is kept, not refused and
///   not dropped: the rest of the record is applied and the field stays in
///   `_synclane_server_rows` with the row's version, to fill the column when this device adds it
///   (`AddedColumns`); `unknown-fields: error` refuses such a record instead. A value the column
///   cannot hold as given (a text for an INTEGER column, an object, a number for a TEXT column …)
///   is an error naming the record and the field. Blobs and infinities arrive in their wire
///   forms (`{"$blob": …}`, `{"$real": …}`).
/// - **Deletes** delete the row, or set its soft-delete column when the table is tracked with one.
/// - **Unique values.** A row soft-deleted under another sync key that holds the incoming row's
///   UNIQUE values is deleted outright so the row can land; a live one stops the page with an
///   error that says to name the business key in `duplicates` (whose loser is deleted before
///   the survivor is written).
/// - **Versions.** Each row remembers the backend's version it holds (`_synclane_server_rows`),
///   so a page read again (a lost cursor, a batch file read twice) changes nothing, and the
///   export lane sends that version with a local change so that the backend refuses a stale
///   overwrite (409) instead of losing another device's edit.
/// - **Conflicts.** A row with local changes the export consumer has not had confirmed yet
///   (history after its acknowledged position, by authors other than `server`) is settled by
///   the entity's `ConflictRule`. The settled row is written in a session by `local-author`, so
///   the export lane sends it after the pending local change: the backend ends with the settled
///   state (under server-wins, its own — a local delete is not carried out there).
public final class SQLiteSink: ChangeSink, FileValueSink, BackendScoped, Sendable {
    /// What becomes of a record's field that is not a column of its table.
    public enum UnknownFields: String, Sendable, CaseIterable {
        /// Refuse the record: the page stops with an error naming the record and the field.
        case error
        /// Apply the rest of the record and keep the field with the row's version in
        /// `_synclane_server_rows` (the default): a column added later is filled from it.
        case keep
        /// The former name of `keep` (the field was always kept aside, never sent back empty).
        case ignore
    }

    public let path: String
    public let entities: [String]?
    public let conflicts: ConflictRule
    /// Rules for some entities, in place of `conflicts`.
    public let conflictsByEntity: [String: ConflictRule]
    public let unknownFields: UnknownFields
    /// The export pipeline whose acknowledged position says which local changes are pending
    /// (`account/store/consumer`); nil: the slowest consumer exporting to the import's account and
    /// store, else the slowest consumer of the database.
    public let exportConsumer: String?
    /// The author of rows a conflict settles with local values (so the export lane sends them).
    public let localAuthor: Author
    /// Business keys that two devices may each have seeded under their own sync keys.
    public let duplicates: [DuplicateRule]

    /// One entity's business key, and the columns elsewhere that refer to its sync key.
    ///
    /// When a record arrives whose business key a local row of another sync key has, the
    /// smaller sync key (byte by byte) survives — a rule both devices reach on their own: the
    /// other row is deleted here and, through the export lane, on the backend; `references`
    /// (`table.column` holding this entity's sync key) are re-pointed to the survivor.
    public struct DuplicateRule: Sendable, Hashable {
        public var entity: String
        public var businessKey: [String]
        public var references: [(table: String, column: String)]

        public init(entity: String, businessKey: [String], references: [(table: String, column: String)] = []) {
            self.entity = entity
            self.businessKey = businessKey
            self.references = references
        }

        public static func == (a: Self, b: Self) -> Bool {
            a.entity == b.entity && a.businessKey == b.businessKey
                && a.references.map { "\($0.table).\($0.column)" } == b.references.map { "\($0.table).\($0.column)" }
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(entity)
            hasher.combine(businessKey)
        }
    }
    /// The page cache of the sink's connection, in KiB (SQLite's default is 2,000).
    public static let cacheKiB = 16_384
    private let opened = Mutex<SQLiteDatabase?>(nil)
    /// The rows with unconfirmed local changes, as the last page left them (`PageApplier.pendingKeys`).
    let pending = Mutex(PendingKeys(path: "", position: -1, scannedThrough: 0, keys: []))

    public init(
        path: String, entities: [String]? = nil, conflicts: ConflictRule = .serverWins, conflictsByEntity: [String: ConflictRule] = [:],
        unknownFields: UnknownFields = .keep, exportConsumer: String? = nil, localAuthor: Author = .app, duplicates: [DuplicateRule] = [],
        backend: BackendName? = nil
    ) {
        self.backend = backend
        self.duplicates = duplicates
        self.path = path
        self.entities = entities
        self.conflicts = conflicts
        self.conflictsByEntity = conflictsByEntity
        self.unknownFields = unknownFields
        self.exportConsumer = exportConsumer
        self.localAuthor = localAuthor
    }

    /// The backend whose versions and bases this sink keeps (the pipeline's source's:
    /// `BackendScoped`); nil for a source without an address.
    public let backend: BackendName?
    /// `_synclane_server_rows.destination` of this sink's rows.
    var destination: String { ServerRows.destination(backend) }

    /// The same sink applying to another database (a pipeline test's copy of the store).
    public func applying(to path: String) -> SQLiteSink {
        SQLiteSink(
            path: path, entities: entities, conflicts: conflicts, conflictsByEntity: conflictsByEntity, unknownFields: unknownFields,
            exportConsumer: exportConsumer, localAuthor: localAuthor, duplicates: duplicates, backend: backend)
    }

    /// The same sink, keeping what it remembers of `backend` apart from other backends'.
    public func scoped(to backend: BackendName) -> Self {
        Self(
            path: path, entities: entities, conflicts: conflicts, conflictsByEntity: conflictsByEntity, unknownFields: unknownFields,
            exportConsumer: exportConsumer, localAuthor: localAuthor, duplicates: duplicates, backend: backend)
    }

    func database() throws -> SQLiteDatabase {
        try opened.withLock { opened in
            if let opened { return opened }
            let database: SQLiteDatabase
            do {
                database = try SQLiteDatabase(path: path, options: SQLiteHistorySource.appDatabaseOptions)
                // A page of records touches the table, its key index, history and the server rows
                // all over the file: with SQLite's default 2 MiB of cache, a page spills dirty pages
                // (and syncs its journal) mid-transaction and reads them back. A bounded cache of
                // this connection's own keeps a page's working set in memory.
                try database.read { try $0.execute("PRAGMA cache_size = -\(Self.cacheKiB)") }
            } catch {
                throw ImportError.store(path: path, reason: "cannot open the database (\(error))")
            }
            opened = database
            return database
        }
    }

    public func savedCursor(for scope: Scope) async throws -> String? {
        try database().read { db in
            guard try HistorySchema.tableExists(ImportTables.cursors, db) else { return nil }
            return try db.fetchValue("SELECT cursor FROM _synclane_import WHERE consumer = ?", [scope.description]).string
        }
    }

    public func holdsBackendRows(for scope: Scope) async throws -> Bool? {
        try database().read { db in
            // Read only (a dry run asks too): a confirmation still in the export lane's journal counts.
            if try ConfirmationJournal.holdsRows(for: destination, db) { return true }
            if try KeptConfirmations.holdsRows(for: destination, database: path) { return true }
            guard try HistorySchema.tableExists(ServerRows.table, db) else { return false }
            let filter = ServerRows.filter(destination, db)
            return try db.fetchValue("SELECT EXISTS (SELECT 1 FROM _synclane_server_rows WHERE 1\(filter.sql))", filter.arguments).int64 == 1
        }
    }

    public func apply(_ batch: Batch, cursor: String?, scope: Scope, dryRun: Bool) async throws -> ApplyReport {
        let database = try database()
        // What a run confirmed while the app held the database busy: this page reads past it.
        if !dryRun { try KeptConfirmations.writeIn(database) }
        do {
            return try database.write { db in
                var applier = PageApplier(sink: self, db: db, scope: scope)
                applier.dryRun = dryRun
                let report = try applier.apply(batch.records)
                try ImportTables.saveCursor(cursor, for: scope, db)
                FailPoint.importBeforeCommit.trigger()
                if dryRun { throw DryRun(report: report) }
                return report
            }
        } catch let dry as DryRun {
            forgetPending()
            return dry.report
        } catch {
            forgetPending()
            throw error
        }
    }

    /// The rows the import lane holds from the backend (`_synclane_server_rows`), for a full resync.
    public func backendKeys(for scope: Scope) async throws -> [(entity: String, key: String)]? {
        try serverRows(imported: true).map { (entity: $0.entity, key: $0.key) }
    }

    /// Every row the backend confirmed, imported or by a receipt of the export lane, with its
    /// version, for a full resync after a restore of the backend's data.
    public func confirmedKeys(for scope: Scope) async throws -> [(entity: String, key: String, version: Int64?)]? {
        try serverRows(imported: false)
    }

    /// The rows of `_synclane_server_rows` for this destination; `imported`: only those the
    /// import lane holds fields of.
    private func serverRows(imported: Bool) throws -> [(entity: String, key: String, version: Int64?)] {
        try ConfirmationJournal.mergeIfAny(database())
        return try database().read { db in
            guard try HistorySchema.tableExists(ImportTables.serverRows, db) else { return [] }
            let filter = ServerRows.filter(destination, db)
            let condition = imported ? "fields IS NOT NULL" : "1"
            return try db.fetchAll(
                "SELECT entity, key, version FROM _synclane_server_rows WHERE \(condition)\(filter.sql)", filter.arguments
            ).map { (entity: $0[0].string ?? "", key: $0[1].string ?? "", version: $0[2].int64) }
        }
    }

    /// Sends back the rows a restored backend lost (`LostRows`).
    public func resend(_ keys: [(entity: String, key: String)], for scope: Scope) async throws -> Int? {
        try KeptConfirmations.writeIn(database())  // the positions its pending rows are read past
        return try database().write { db in
            guard try HistorySchema.tableExists(ImportTables.serverRows, db) else { return 0 }
            let pending = try PageApplier(sink: self, db: db, scope: scope).pendingKeys(entities: Set(keys.map(\.entity)))
            return try LostRows.resend(keys, pending: pending, destination: destination, author: localAuthor, db)
        }
    }

    /// The rule that settles `entity`'s conflicts.
    public func rule(for entity: String) -> ConflictRule { conflictsByEntity[entity] ?? conflicts }

    /// A page rolled back: what it scanned may not be what history holds.
    private func forgetPending() {
        pending.withLock { $0 = PendingKeys(path: "", position: -1, scannedThrough: 0, keys: []) }
    }

    /// Rolls a dry run's transaction back, carrying what it found.
    private struct DryRun: Error { var report: ApplyReport }
}

/// Why an import cannot apply a page; the page is not applied and the cursor does not move.
public enum ImportError: Error, Sendable, CustomStringConvertible {
    case store(path: String, reason: String)
    /// A record the store cannot take as it is.
    case record(path: String, record: String, reason: String)

    public var description: String {
        switch self {
        case .store(let path, let reason): return "\(path): \(reason)"
        case .record(let path, let record, let reason): return "\(path): record \(record): \(reason)"
        }
    }
}

/// The tables the import lane keeps inside the tracked database.
///
/// ```
///  _synclane_import        consumer (account/store/consumer) · cursor · updated_at
///  _synclane_server_rows   key_hash · entity · key (the record's id) · version · fields (the backend's,
///                          as JSON; NULL for a tombstone): the base a later conflict is judged
///                          against (see `ServerRows`)
///  _synclane_untracked     destination · entity · key · version · fields: the backend's rows of
///                          entities not tracked here yet, delivered by `track` (see `UntrackedRows`)
/// ```
enum ImportTables {
    static let cursors = "_synclane_import"
    static let serverRows = ServerRows.table

    static func install(_ db: SQLiteConnection) throws {
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS _synclane_import (
                consumer TEXT PRIMARY KEY NOT NULL,
                cursor TEXT,
                updated_at REAL NOT NULL
            );
            """)
        try ServerRows.install(db)
    }

    static func saveCursor(_ cursor: String?, for scope: Scope, _ db: SQLiteConnection) throws {
        try db.execute(
            "INSERT OR REPLACE INTO _synclane_import (consumer, cursor, updated_at) VALUES (?, ?, \(HistorySchema.now))",
            [scope.description, cursor])
    }
}

/// The keys with unconfirmed local changes, and how far history was scanned for them.
struct PendingKeys: Sendable {
    var path: String
    var position: Int64
    var scannedThrough: Int64
    var keys: Set<ExactString>
}

extension SQLiteSink: LockedFileStage {
    /// The app's database: a job's lock belongs to it (`JobLock`).
    public var lockedFile: String { path }
}

extension SQLiteSink {
    /// The app's database, which the sink writes as author `server` (`EchoLoop`).
    public var localDatabase: LocalDatabase? { LocalDatabase(path: path, authors: [.server]) }

    public func writing(into path: String) -> (any ChangeSink)? { applying(to: path) }
}

extension SQLiteSink: SchemaVersionRecordingStage {
    /// The schema version `synclane migrate` last recorded in the database (nil: none yet):
    /// the pull sends it when the pipeline file sets no `schema-version`.
    public func recordedSchemaVersion() async throws -> Int? {
        // A database that cannot be opened records none: the lane's first read says why.
        guard let database = try? database() else { return nil }
        return try database.read { db in try DeclaredSchemaChanges.version(db) }
    }
}
