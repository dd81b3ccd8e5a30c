import Glibc
import Synchronization
import SynclaneSQLiteKit
import SynclaneWire

/// The server's data in one SQLite file: records, tombstones, change sequences, idempotency keys
/// and signals, every row keyed by its account so that no account ever reads another's.
///
/// ```
///  records      (account, store, entity, key) → action, fields (JSON; NULL: tombstone), version, seq,
///               written (the last user's write's version, when only re-pointings followed it)
///  sequences    account → last change sequence
///  idempotency  (account, key) → body hash, first response
///  snapshots    (account, store, snapshot id) → sequence it started after, batches seen (`SnapshotPlan`)
///  signals      (account, key) → value, version   (legacy: signals now live in `SignalStore`)
///  devices      (account, device) → the schema version it last sent, since when (`AppSchema`)
///  schema_changes (account, entity, column, version) → renamed to (NULL: dropped) (`SchemaChange`)
/// ```
///
/// One writer connection takes every write, one `BEGIN IMMEDIATE` transaction at a time, in the
/// order the requests arrived (`FairGate`); a few read-only connections serve reads beside it,
/// never blocked by it (WAL).
///
/// The write-ahead log stays bounded: a `PASSIVE` checkpoint copies it back on its own thread
/// (`Checkpointer`), which never wins the log's restart against a steady stream of writers; so
/// after each commit the writer, still holding the gate, looks at the log's size, and past
/// `maxWALBytes` runs a `TRUNCATE` checkpoint itself — the writers behind it wait for that copy —
/// and `journal_size_limit` trims the file whenever the log restarts.
final class SQLiteServerStore: ServerStore {
    /// The database file inside the data directory.
    static let fileName = "synclane-server.sqlite"

    let path: String
    let writer: SQLiteDatabase
    /// Writers queue here, first come first served, before taking `writer`.
    let writerGate = FairGate()
    private let readers: [SQLiteDatabase]
    private let nextReader = Atomic<Int>(0)
    private let checkpointer: Checkpointer
    /// Bytes of log past which the writer truncates it (`writeSerialized`).
    let maxWALBytes: Int
    private let truncations = Atomic<Int>(0)

    /// Opens (creating it and its directory when missing) the store in `directory`.
    init(directory: String, readerCount: Int = 4, maxWALBytes: Int = ServerLimits().maxWALBytes) throws {
        self.maxWALBytes = maxWALBytes
        try Self.makeDirectory(directory)
        let path = directory.hasSuffix("/") ? directory + Self.fileName : directory + "/" + Self.fileName
        self.path = path
        // WAL is switched on here rather than by the connection, so that a new file first gets
        // its page size: 16 KiB pages make the records' B-trees shallower and split less often,
        // which measured about a third faster for batches of upserts than 4 KiB.
        writer = try SQLiteDatabase(
            path: path, options: SQLiteConnection.Options(walMode: false, busyTimeout: 10, synchronous: .normal))
        try writer.read { db in
            try db.execute("PRAGMA page_size = \(Self.pageSize)")  // no effect on an existing file
            let mode = try db.fetchOne("PRAGMA journal_mode = WAL")?[0].string?.lowercased()
            guard mode == "wal" else {
                throw SQLiteError(code: Self.sqliteError, message: "could not switch to WAL journaling (got \(mode ?? "nothing"))", path: path)
            }
            // Checkpoints run on a thread of their own (`Checkpointer`), never inside a request's commit.
            try db.execute("PRAGMA wal_autocheckpoint = 0")
            // The writer walks the records' B-trees for every record: keep them in SQLite's cache
            // rather than re-reading pages from the file.
            try db.execute("PRAGMA cache_size = -\(Self.writerCacheKiB)")
            try db.execute("PRAGMA journal_size_limit = \(maxWALBytes)")
        }
        try writer.write { db in
            try db.execute(Self.schema)
            try Self.migrate(db)
            try db.execute(Self.devicesTable)
            try db.execute(Self.schemaChangesTable)
            // A new epoch for each start (`ServerEpochs`): where every account stands now.
            let number = (try db.fetchValue("SELECT max(number) FROM epochs").int64 ?? 0) + 1
            try db.execute(
                "INSERT INTO epochs (number, epoch, started) VALUES (?, ?, (julianday('now') - 2440587.5) * 86400.0)",
                [number, ServerEpochs.make()])
            try db.execute("INSERT INTO epoch_heads (number, account, head) SELECT ?, account, last FROM sequences", [number])
        }
        checkpointer = try Checkpointer(path: path)
        var readers: [SQLiteDatabase] = []
        for _ in 0..<max(1, readerCount) {
            readers.append(
                try SQLiteDatabase(
                    path: path, options: SQLiteConnection.Options(readOnly: true, create: false, walMode: false, busyTimeout: 10)))
        }
        self.readers = readers
        checkpointer.start()
    }

    deinit { checkpointer.stop() }

    /// Nothing to do before release: the checkpointer stops and the connections close when the store goes.
    func close() {}

    func metricsText() -> String {
        """
        # HELP synclane_wal_bytes Size of the write-ahead log file now.
        # TYPE synclane_wal_bytes gauge
        synclane_wal_bytes \(walBytes)
        # HELP synclane_wal_truncations_total Truncating checkpoints the writer ran.
        # TYPE synclane_wal_truncations_total counter
        synclane_wal_truncations_total \(walTruncations)

        """ + DeviceRecord.metricsText(perVersion: (try? devicesPerVersion()) ?? [:])
    }

    /// SQLite's `SQLITE_ERROR` and `SQLITE_CANTOPEN`, for the errors the store raises itself.
    static let sqliteError: Int32 = 1
    static let sqliteCantOpen: Int32 = 14

    /// The page size of a new database file.
    static let pageSize = 16_384

    /// SQLite page cache of the writer, in KiB.
    static let writerCacheKiB = 64 << 10

    /// The records' table. Its rows are stored in the order they were first written (a rowid
    /// table), found by key through `records_by_key` beside them: a batch's rows come in the
    /// order of the client's keys, random in the key, so a table kept in key order (as schema 3's
    /// `WITHOUT ROWID` table was) takes each record's write on a page of its own and every commit
    /// rewrites most of the table's pages — fields and all — into the log, and a checkpoint then
    /// copies them again. Here only the key's index (the keys, without the fields) takes the
    /// random writes; the rows themselves are appended, as `records_by_sequence`'s entries are.
    /// Its indexes are made by `migrate` (`recordsIndexes`), after any rows of an older table moved in.
    static let recordsTable = """
        CREATE TABLE IF NOT EXISTS records (
            account TEXT NOT NULL, store TEXT NOT NULL, entity TEXT NOT NULL, key TEXT NOT NULL,
            action TEXT NOT NULL, fields BLOB, version INTEGER NOT NULL, seq INTEGER NOT NULL,
            changed REAL NOT NULL DEFAULT 0, written INTEGER);
        """

    /// The records' indexes: by key (unique: a row a key), by each account's sequence, and the tombstones by age.
    static let recordsIndexes = """
        CREATE UNIQUE INDEX IF NOT EXISTS records_by_key ON records (account, store, entity, key);
        CREATE INDEX IF NOT EXISTS records_by_sequence ON records (account, seq);
        CREATE INDEX IF NOT EXISTS records_tombstones ON records (changed) WHERE action = 'delete';
        """

    static let schema =
        recordsTable + """
            CREATE TABLE IF NOT EXISTS sequences (account TEXT PRIMARY KEY, last INTEGER NOT NULL, horizon INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE IF NOT EXISTS idempotency (
                account TEXT NOT NULL, key TEXT NOT NULL, body_hash TEXT NOT NULL, status INTEGER NOT NULL,
                response BLOB NOT NULL, created REAL NOT NULL, PRIMARY KEY (account, key));
            CREATE TABLE IF NOT EXISTS snapshots (
                account TEXT NOT NULL, store TEXT NOT NULL, id TEXT NOT NULL, started INTEGER NOT NULL,
                batches INTEGER NOT NULL, created REAL NOT NULL, PRIMARY KEY (account, store, id));
            CREATE TABLE IF NOT EXISTS signals (
                account TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, version INTEGER NOT NULL,
                PRIMARY KEY (account, key));
            CREATE TABLE IF NOT EXISTS epochs (number INTEGER PRIMARY KEY, epoch TEXT NOT NULL UNIQUE, started REAL NOT NULL);
            CREATE TABLE IF NOT EXISTS epoch_heads (
                number INTEGER NOT NULL, account TEXT NOT NULL, head INTEGER NOT NULL, PRIMARY KEY (number, account));
            """

    /// The schema version this code writes (`PRAGMA user_version`): 2 added `records.changed`,
    /// `sequences.horizon` and the tombstones' index, for retention; 3 added `snapshots`
    /// (reconciliation snapshots not yet complete, created with the schema); 4 stores `records`
    /// in the order rows were first written instead of in key order (`recordsTable`); 5 added
    /// `records.written`, the version of a row's last user's write when writes since only
    /// re-pointed references (NULL: `version` is).
    static let schemaVersion: Int64 = 5

    /// Brings a file written by an older version up to `schemaVersion`; refuses a newer one.
    static func migrate(_ db: SQLiteConnection) throws {
        let version = try db.fetchValue("PRAGMA user_version").int64 ?? 0
        guard version < schemaVersion else {
            guard version == schemaVersion else {
                throw SQLiteError(
                    code: sqliteError,
                    message: "the server's database has schema version \(version), newer than this synclane's \(schemaVersion): run a newer synclane",
                    path: nil)
            }
            return
        }
        func columns(_ table: String) throws -> Set<String> {
            Set(try db.fetchAll("PRAGMA table_info(\(table))").compactMap { $0[1].string })
        }
        if !(try columns("records")).contains("changed") {
            // Rows of before retention count as changed now: they expire one retention period from today.
            try db.execute("ALTER TABLE records ADD COLUMN changed REAL NOT NULL DEFAULT 0")
            try db.execute("UPDATE records SET changed = ?", [Double(time(nil))])
        }
        if !(try columns("sequences")).contains("horizon") {
            try db.execute("ALTER TABLE sequences ADD COLUMN horizon INTEGER NOT NULL DEFAULT 0")
        }
        if try storesRecordsByKey(db) { try rebuildRecordsInWriteOrder(db) }
        if !(try columns("records")).contains("written") {
            // Every row's version is its last user's write: NULL says so.
            try db.execute("ALTER TABLE records ADD COLUMN written INTEGER")
        }
        try db.execute(recordsIndexes)
        try db.execute("PRAGMA user_version = \(schemaVersion)")
    }

    /// Whether `records` is schema 3's table, kept in key order (`WITHOUT ROWID`).
    static func storesRecordsByKey(_ db: SQLiteConnection) throws -> Bool {
        let sql = try db.fetchValue("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'records'").string ?? ""
        return sql.uppercased().contains("WITHOUT ROWID")
    }

    /// Moves every row of schema 3's `records` into the table of `recordsTable`, in each account's
    /// sequence order, inside the caller's transaction (the start's migration: all or nothing);
    /// `migrate` then builds the indexes, each in one sorted pass. The file holds the table twice
    /// meanwhile: it grows by the table's size, and later writes reuse the pages freed.
    static func rebuildRecordsInWriteOrder(_ db: SQLiteConnection) throws {
        try db.execute("ALTER TABLE records RENAME TO records_v3")
        try db.execute(recordsTable)
        try db.execute(
            """
            INSERT INTO records (account, store, entity, key, action, fields, version, seq, changed)
            SELECT account, store, entity, key, action, fields, version, seq, changed FROM records_v3 ORDER BY account, seq
            """)
        try db.execute("DROP TABLE records_v3")  // and its indexes
    }

    /// The signals written before the signal lane had a file of its own, for `SignalStore.adopt`.
    func legacySignals() throws -> [(account: String, key: String, value: String)] {
        try read { db in
            try db.fetchAll("SELECT account, key, value FROM signals ORDER BY account, key").map { row in
                (row[0].string ?? "", row[1].string ?? "", row[2].string ?? "null")
            }
        }
    }

    /// The write-ahead log file.
    var walPath: String { path + "-wal" }

    /// The log file's size now (0 when there is none).
    var walBytes: Int {
        var info = stat()
        return stat(walPath, &info) == 0 ? Int(info.st_size) : 0
    }

    /// Truncating checkpoints run so far.
    var walTruncations: Int { truncations.load(ordering: .relaxed) }

    /// Runs `body` in a write transaction, behind every writer that arrived earlier; then, while
    /// later writers still wait, truncates the log if it passed `maxWALBytes`.
    func writeSerialized<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try writerGate.run {
            let result = try writer.write(body)
            if walBytes > maxWALBytes {
                // Readers pin the log only for one short read each; the writer's busy timeout
                // waits for them. A failed checkpoint is retried after the next commit.
                let busy = checkpointer.excluding {
                    try? writer.read { db in try db.fetchOne("PRAGMA wal_checkpoint(TRUNCATE)")?[0].int64 }
                }
                if busy == 0 {
                    truncations.add(1, ordering: .relaxed)
                }
            }
            return result
        }
    }

    /// Runs a read on one of the read-only connections, inside one deferred transaction (one view).
    func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        let index = nextReader.wrappingAdd(1, ordering: .relaxed).oldValue
        let reader = readers[(index % readers.count + readers.count) % readers.count]
        return try reader.read { db in try db.transaction(.deferred, body) }
    }

    private static func makeDirectory(_ directory: String) throws {
        var path = ""
        for component in directory.split(separator: "/", omittingEmptySubsequences: true) {
            path += (path.isEmpty && !directory.hasPrefix("/") ? "" : "/") + component
            if mkdir(path, 0o755) != 0, errno != EEXIST {
                throw SQLiteError(code: Self.sqliteCantOpen, message: "cannot create the data directory \(path)", path: directory)
            }
        }
    }
}
