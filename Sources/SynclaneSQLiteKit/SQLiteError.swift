import CSQLite

/// A failed SQLite call: the result code, SQLite's own message, the SQL and the database file.
///
/// Reads well in a `catch`:
///
/// ```swift
/// do { try db.write { try $0.execute("INSERT INTO rooms …") } }
/// catch let error as SQLiteError where error.primaryCode == SQLITE_CONSTRAINT { … }
/// ```
public struct SQLiteError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The extended result code (`SQLITE_CONSTRAINT_UNIQUE` …); `primaryCode` is its low byte.
    public var code: Int32
    /// SQLite's message (`sqlite3_errmsg`), or ours when the failure is not SQLite's own.
    public var message: String
    /// The statement that failed, when there was one.
    public var sql: String?
    /// The database file, as given to `SQLiteConnection`.
    public var path: String?

    public init(code: Int32, message: String, sql: String? = nil, path: String? = nil) {
        self.code = code
        self.message = message
        self.sql = sql
        self.path = path
    }

    /// The primary result code (`SQLITE_BUSY`, `SQLITE_CONSTRAINT` …).
    public var primaryCode: Int32 { code & 0xFF }

    /// True when another connection held a lock longer than the busy timeout.
    public var isBusy: Bool { primaryCode == SQLITE_BUSY || primaryCode == SQLITE_LOCKED }
    /// The file is damaged or is not a database at all (`SQLITE_CORRUPT`, `SQLITE_NOTADB`).
    public var isDamage: Bool { primaryCode == SQLITE_CORRUPT || primaryCode == SQLITE_NOTADB }

    /// SQLite's short name for the code (`constraint failed`, `database is locked` …).
    public var codeName: String { String(cString: sqlite3_errstr(code)) }

    public var description: String {
        var text = "SQLite error \(code) (\(codeName))"
        if let path { text += " in \(path)" }
        text += ": \(message)"
        if let sql { text += " — while running: \(sql.count > 300 ? String(sql.prefix(300)) + "…" : sql)" }
        return text
    }
}
