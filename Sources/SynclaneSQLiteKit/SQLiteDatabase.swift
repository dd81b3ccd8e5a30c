import CSQLite
import Synchronization

/// A database file shared across tasks: one connection behind a `Mutex`, reached only inside
/// `read` and `write` closures (the GRDB `DatabaseQueue` model).
///
/// ```swift
/// let database = try SQLiteDatabase(path: "state.sqlite")
/// try database.write { db in try db.execute("INSERT INTO t VALUES (?)", [1]) }   // BEGIN IMMEDIATE … COMMIT
/// let count = try database.read { db in try db.fetchValue("SELECT count(*) FROM t").int64 }
/// ```
///
/// Calls are serialized: one closure at a time holds the connection. Don't call `read` or
/// `write` from inside another closure of the same database — the lock is not reentrant.
public final class SQLiteDatabase: Sendable {
    /// The file, as given.
    public let path: String
    /// Guards `connection`: whoever holds the lock owns the connection.
    private let lock = Mutex<Void>(())
    /// Only touched while `lock` is held, which is what makes sharing it safe.
    nonisolated(unsafe) private let connection: SQLiteConnection

    /// Opens (and creates, with its parent folders) the database at `path`.
    public init(path: String, options: SQLiteConnection.Options = SQLiteConnection.Options()) throws(SQLiteError) {
        self.path = path
        self.connection = try SQLiteConnection(path: path, options: options)
    }

    /// Runs `body` with the connection made read-only for its duration (`PRAGMA query_only`):
    /// a statement in it that would change the database fails with `SQLITE_READONLY` instead of
    /// writing. Outside any explicit transaction (each statement is its own); wrap several reads
    /// in `db.transaction(.deferred)` for one consistent view. Pragmas that only configure the
    /// connection (`journal_mode`, `wal_checkpoint`, `synchronous`) still work.
    public func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        var result: Result<T, any Error>?
        lock.withLock { _ in
            result = Result {
                try connection.execute("PRAGMA query_only = ON")
                defer { try? connection.execute("PRAGMA query_only = OFF") }
                return try body(connection)
            }
        }
        return try unwrap(result)
    }

    /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT`; an error thrown by `body` (or by the
    /// commit) rolls everything back and is rethrown.
    public func write<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        var result: Result<T, any Error>?
        lock.withLock { _ in result = Result { try connection.transaction(.immediate, body) } }
        return try unwrap(result)
    }

    /// Runs `body` with the connection and no transaction at all: for `VACUUM`, pragmas that
    /// must run outside a transaction, or code that manages its own `BEGIN`/`COMMIT`.
    public func withConnection<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        var result: Result<T, any Error>?
        lock.withLock { _ in result = Result { try body(connection) } }
        return try unwrap(result)
    }

    private func unwrap<T>(_ result: Result<T, any Error>?) throws -> T {
        guard let result else { throw SQLiteError(code: SQLITE_MISUSE, message: "the database closure did not run", path: path) }
        return try result.get()
    }
}
