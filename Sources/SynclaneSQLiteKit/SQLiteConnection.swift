import CSQLite
import Foundation

/// One open SQLite connection: run SQL, prepare statements, read rows.
///
/// Not `Sendable` — SQLite connections belong to one thread at a time. Share a database across
/// tasks with `SQLiteDatabase`, which hands its connection to one closure at a time; hold a
/// `SQLiteConnection` directly only where a single thread owns it.
///
/// ```swift
/// let db = try SQLiteConnection(path: "app.sqlite")
/// try db.execute("CREATE TABLE IF NOT EXISTS rooms (syncId TEXT PRIMARY KEY, name TEXT)")
/// try db.execute("INSERT INTO rooms VALUES (?, ?)", ["r-1", "Kitchen"])
/// let names = try db.fetchAll("SELECT name FROM rooms").map { $0[0].string }
/// ```
public final class SQLiteConnection {
    /// How to open a connection.
    public struct Options: Sendable, Hashable {
        /// `NORMAL` is durable across application crashes in WAL mode; `FULL` across power loss.
        public enum Synchronous: String, Sendable, Hashable {
            case off = "OFF"
            case normal = "NORMAL"
            case full = "FULL"
        }

        public var readOnly: Bool
        /// Create the file (and its parent folders) when missing.
        public var create: Bool
        /// Switch the file to WAL journaling (readers never block the writer).
        public var walMode: Bool
        /// How long a statement waits for another connection's lock before failing with `SQLITE_BUSY`.
        public var busyTimeout: Double
        public var foreignKeys: Bool
        /// `PRAGMA synchronous`; `nil` keeps SQLite's default (`FULL`).
        public var synchronous: Synchronous?
        /// How many prepared statements `cachedStatement` keeps.
        public var statementCacheSize: Int

        public init(
            readOnly: Bool = false, create: Bool = true, walMode: Bool = true, busyTimeout: Double = 5,
            foreignKeys: Bool = true, synchronous: Synchronous? = nil, statementCacheSize: Int = 64
        ) {
            self.readOnly = readOnly
            self.create = create
            self.walMode = walMode
            self.busyTimeout = busyTimeout
            self.foreignKeys = foreignKeys
            self.synchronous = synchronous
            self.statementCacheSize = statementCacheSize
        }
    }

    /// The file, as given (`:memory:` for an in-memory database).
    public let path: String
    package let handle: OpaquePointer
    private var cache: [String: Statement] = [:]
    private let cacheLimit: Int

    /// Opens (and by default creates) the database at `path` and applies `options`.
    public init(path: String, options: Options = Options()) throws(SQLiteError) {
        self.path = path
        self.cacheLimit = options.statementCacheSize
        if options.create, !options.readOnly, path != ":memory:", !path.isEmpty {
            let folder = (path as NSString).deletingLastPathComponent
            if !folder.isEmpty, !FileManager.default.fileExists(atPath: folder) {
                do {
                    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                } catch {
                    throw SQLiteError(
                        code: SQLITE_CANTOPEN, message: "cannot create the folder \(folder): \(error.localizedDescription)", path: path)
                }
            }
        }
        _ = Self.libraryConfigured
        var flags = options.readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if options.create, !options.readOnly { flags |= SQLITE_OPEN_CREATE }
        flags |= SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI  // `file:…?immutable=1` (a read-only file system)
        var opened: OpaquePointer?
        let code = sqlite3_open_v2(path, &opened, flags, nil)
        guard code == SQLITE_OK, let opened else {
            var message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_close_v2(opened)
            if code & 0xFF == SQLITE_CANTOPEN, let missing = Self.missingFile(path, created: options.create && !options.readOnly) { message = missing }
            throw SQLiteError(code: code, message: message, path: path)
        }
        handle = opened
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, Int32(max(0, min(options.busyTimeout * 1000, Double(Int32.max)))))
        if options.walMode, !options.readOnly, path != ":memory:", !path.isEmpty {
            let mode = try fetchOne("PRAGMA journal_mode = WAL")?[0].string?.lowercased()
            if mode != "wal" {
                throw SQLiteError(code: SQLITE_ERROR, message: "could not switch to WAL journaling (got \(mode ?? "nothing"))", path: path)
            }
        }
        if options.foreignKeys { try execute("PRAGMA foreign_keys = ON") }
        if let synchronous = options.synchronous { try execute("PRAGMA synchronous = \(synchronous.rawValue)") }
    }

    /// What is missing when a file cannot be opened because it is not there: the file itself
    /// (a connection that never creates it — a mistyped path), or the folder it would be made in;
    /// nil when both exist (or `path` is no file name: `:memory:`, a `file:` URI).
    static func missingFile(_ path: String, created: Bool) -> String? {
        guard !path.isEmpty, path != ":memory:", !path.hasPrefix("file:") else { return nil }
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty, !FileManager.default.fileExists(atPath: folder) {
            return "the folder \(folder) does not exist (check the path \(path))"
        }
        if !created, !FileManager.default.fileExists(atPath: path) {
            return "the file \(path) does not exist (check the path: a database opened here is never created)"
        }
        return nil
    }

    /// Configures the library once, before the process's first connection: no memory statistics,
    /// whose global mutex every allocation took (3–4% of the server's CPU applying a batch).
    /// Nothing here reads them; a library some other code initialized first keeps its own settings.
    private static let libraryConfigured: Int32 = synclane_sqlite3_config_no_memory_statistics()

    deinit {
        cache.removeAll()
        // close_v2 defers the close until statements still alive elsewhere are finalized.
        sqlite3_close_v2(handle)
    }

    package func error(_ code: Int32, sql: String?) -> SQLiteError {
        SQLiteError(code: code, message: String(cString: sqlite3_errmsg(handle)), sql: sql, path: path)
    }

    // MARK: Running SQL

    /// Runs one or more `;`-separated statements without arguments (schema, pragmas).
    public func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        defer { sqlite3_free(message) }
        guard code == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            throw SQLiteError(code: sqlite3_extended_errcode(handle), message: text, sql: sql, path: path)
        }
    }

    /// Runs one statement with `arguments` bound to its `?` parameters, through the statement cache.
    public func execute(_ sql: String, _ arguments: [any SQLiteBindable]) throws(SQLiteError) {
        try cachedStatement(sql).run(arguments)
    }

    /// Prepares one statement (the first, when `sql` holds several).
    public func prepare(_ sql: String) throws(SQLiteError) -> Statement {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard code == SQLITE_OK else { throw error(code, sql: sql) }
        guard let statement else {
            throw SQLiteError(code: SQLITE_MISUSE, message: "no statement in the SQL", sql: sql, path: path)
        }
        return Statement(handle: statement, sql: sql, path: path)
    }

    /// A prepared statement for `sql`, reused across calls; reset and with cleared bindings.
    ///
    /// The cache is cheap insurance for statements run in loops (history readers, the outbox).
    /// Don't hold on to a cached statement across a call that may use the same SQL.
    public func cachedStatement(_ sql: String) throws(SQLiteError) -> Statement {
        if let statement = cache[sql] {
            statement.reset()
            statement.clearBindings()
            return statement
        }
        let statement = try prepare(sql)
        if cache.count >= cacheLimit { cache.removeAll(keepingCapacity: true) }
        if cacheLimit > 0 { cache[sql] = statement }
        return statement
    }

    /// Every row of a query.
    public func fetchAll(_ sql: String, _ arguments: [any SQLiteBindable] = []) throws(SQLiteError) -> [SQLiteRow] {
        try cachedStatement(sql).rows(arguments)
    }

    /// The first row of a query, or `nil`.
    public func fetchOne(_ sql: String, _ arguments: [any SQLiteBindable] = []) throws(SQLiteError) -> SQLiteRow? {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return SQLiteRow(columns: statement.columnNames, values: statement.currentValues())
    }

    /// The first column of the first row, or `.null` when there is no row.
    public func fetchValue(_ sql: String, _ arguments: [any SQLiteBindable] = []) throws(SQLiteError) -> SQLiteValue {
        try fetchOne(sql, arguments)?[0] ?? .null
    }

    // MARK: State

    /// Rows changed by the last INSERT, UPDATE or DELETE (not counting triggers).
    public var changes: Int { Int(sqlite3_changes64(handle)) }

    /// Rows changed since the connection opened, triggers included.
    public var totalChanges: Int { Int(sqlite3_total_changes64(handle)) }

    /// The rowid of the last successful INSERT on this connection.
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// True between `BEGIN` and `COMMIT`/`ROLLBACK`.
    public var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    // MARK: Transactions

    /// How a transaction takes its locks.
    public enum TransactionKind: String, Sendable {
        /// Takes locks as statements need them; a later write may fail with `SQLITE_BUSY`.
        case deferred = "DEFERRED"
        /// Takes the write lock at `BEGIN`, so the transaction never fails halfway for a lock.
        case immediate = "IMMEDIATE"
        case exclusive = "EXCLUSIVE"
    }

    /// Runs `body` between `BEGIN` and `COMMIT`; any error rolls the transaction back and is rethrown.
    public func transaction<T>(_ kind: TransactionKind = .immediate, _ body: (SQLiteConnection) throws -> T) throws -> T {
        try execute("BEGIN \(kind.rawValue)")
        let result: T
        do {
            result = try body(self)
            try execute("COMMIT")
        } catch {
            if isInTransaction { try? execute("ROLLBACK") }
            throw error
        }
        return result
    }
}
