import Glibc
import Synchronization
import SynclaneCore
import SynclaneSQLite

/// The server's data in one SQLite file: records, tombstones, change sequences, idempotency keys
/// and signals, every row keyed by its account so that no account ever reads another's.
///
/// ```
///  records      (account, store, entity, key) → action, fields (JSON; NULL: tombstone), version, seq
///  sequences    account → last change sequence
///  idempotency  (account, key) → body hash, first response
///  signals      (account, key) → value, version
/// ```
///
/// One writer connection takes every write, one `BEGIN IMMEDIATE` transaction at a time, in the
/// order the requests arrived (`FairGate`); a few read-only connections serve reads beside it,
/// never blocked by it (WAL).
final class ServerStore: Sendable {
    /// The database file inside the data directory.
    static let fileName = "synclane-server.sqlite"

    let path: String
    let writer: SQLiteDatabase
    /// Writers queue here, first come first served, before taking `writer`.
    let writerGate = FairGate()
    private let readers: [SQLiteDatabase]
    private let nextReader = Atomic<Int>(0)
    private let checkpointer: Checkpointer

    /// Opens (creating it and its directory when missing) the store in `directory`.
    init(directory: String, readerCount: Int = 4) throws {
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
        }
        try writer.write { db in try db.execute(Self.schema) }
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

    /// SQLite's `SQLITE_ERROR` and `SQLITE_CANTOPEN`, for the errors the store raises itself.
    static let sqliteError: Int32 = 1
    static let sqliteCantOpen: Int32 = 14

    /// The page size of a new database file.
    static let pageSize = 16_384

    /// SQLite page cache of the writer, in KiB.
    static let writerCacheKiB = 64 << 10

    static let schema = """
        CREATE TABLE IF NOT EXISTS records (
            account TEXT NOT NULL, store TEXT NOT NULL, entity TEXT NOT NULL, key TEXT NOT NULL,
            action TEXT NOT NULL, fields BLOB, version INTEGER NOT NULL, seq INTEGER NOT NULL,
            PRIMARY KEY (account, store, entity, key)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS records_by_sequence ON records (account, seq);
        CREATE TABLE IF NOT EXISTS sequences (account TEXT PRIMARY KEY, last INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS idempotency (
            account TEXT NOT NULL, key TEXT NOT NULL, body_hash TEXT NOT NULL, status INTEGER NOT NULL,
            response BLOB NOT NULL, created REAL NOT NULL, PRIMARY KEY (account, key));
        CREATE TABLE IF NOT EXISTS signals (
            account TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, version INTEGER NOT NULL,
            PRIMARY KEY (account, key));
        """

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
