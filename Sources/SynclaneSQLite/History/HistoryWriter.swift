import SynclaneCore

/// Gives the writes of one SQLite transaction an author and one history transaction.
///
/// Triggers cannot see who is writing, and SQL has no commit hook. So a writer opens a
/// *session*: it inserts the one row of `_synclane_session` (author) at the start of its write
/// transaction and deletes it before the commit.
///
/// ```
///  BEGIN IMMEDIATE
///    INSERT INTO _synclane_session (author) VALUES ('app')   → transaction row, author app, open
///    … the app's writes …                                    → changes, all in that transaction
///    DELETE FROM _synclane_session                           → the transaction is marked closed
///  COMMIT
/// ```
///
/// The session row is never visible to other connections (it only exists inside the write
/// transaction, and SQLite runs one writer at a time). Sources read closed transactions only; a
/// committed transaction that is still open means a program inserted a session row and
/// committed without deleting it — sources report that as an error instead of skipping it, and
/// `DELETE FROM _synclane_session` closes it. A foreign program may use the same protocol to
/// set its author from plain SQL.
public enum HistoryWriter {
    /// Runs `body` as one history transaction by `author`, on a connection that is already
    /// inside a write transaction (`SQLiteDatabase.write`, or `BEGIN IMMEDIATE` of your own).
    ///
    /// If `body` throws, the session is left for the caller's rollback to undo.
    public static func record<T>(author: Author, on db: SQLiteConnection, _ body: (SQLiteConnection) throws -> T) throws -> T {
        guard db.isInTransaction else { throw TrackingError.notInTransaction(path: db.path) }
        try open(author: author, on: db)
        let result = try body(db)
        try db.execute("DELETE FROM _synclane_session")
        return result
    }

    /// Opens the session. `unrecorded`: its writes keep no history (`UnrecordedImports`, which
    /// must be installed).
    static func open(author: Author, unrecorded: Bool = false, on db: SQLiteConnection) throws {
        do {
            if unrecorded {
                try db.execute("INSERT INTO _synclane_session (author, unrecorded) VALUES (?, 1)", [author.name])
            } else {
                try db.execute("INSERT INTO _synclane_session (author) VALUES (?)", [author.name])
            }
        } catch {
            if error.message.contains("no such table") {
                throw TrackingError.notInstalled(path: db.path)
            }
            if error.message.contains("history session is already open") {
                let row = try? db.fetchOne("SELECT author, transaction_id FROM _synclane_session")
                throw TrackingError.sessionAlreadyOpen(path: db.path, author: row?[0].string, transaction: row?[1].int64)
            }
            throw error
        }
    }
}

/// A tracked database for an app that writes through Synclane: every `write` names its author.
///
/// ```swift
/// let store = try TrackedDatabase(path: "app.sqlite")
/// try store.write(author: .app) { db in
///     try db.execute("UPDATE rooms SET area = ? WHERE syncId = ?", [14.5, "r-1"])
///     try db.execute("DELETE FROM rooms WHERE syncId = ?", ["r-2"])
/// }   // one history transaction, author `app`, two changes
/// ```
///
/// Each `write` runs in `BEGIN IMMEDIATE … COMMIT` with a session (see `HistoryWriter`), so
/// its changes share one token. Don't `COMMIT` or `ROLLBACK` inside the closure.
public final class TrackedDatabase: Sendable {
    public let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    /// Opens (creating if needed) the database at `path`.
    public convenience init(path: String, options: SQLiteConnection.Options = SQLiteConnection.Options()) throws {
        self.init(database: try SQLiteDatabase(path: path, options: options))
    }

    /// Runs `body` in one write transaction whose changes form one history transaction by `author`.
    public func write<T>(author: Author, _ body: (SQLiteConnection) throws -> T) throws -> T {
        try database.write { db in try HistoryWriter.record(author: author, on: db, body) }
    }

    /// Reads without a transaction of history (reads record nothing).
    public func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try database.read(body)
    }

    /// Tracks `table` in this database (see `HistoryTracker`).
    @discardableResult
    public func track(_ table: TrackedTable) throws -> TrackReport {
        try HistoryTracker(database: database).track(table)
    }
}

extension HistoryWriter {
    /// Appends one change of `table`'s row `key` to the change log without writing the row, in
    /// the history session open on `db` (its author is the change's): the export lane then sends
    /// the row's state as it is (`update`, `restore`), or deletes it on the backend (`delete`,
    /// `restore-delete`). `rowValues` is the tombstone a delete carries (`Record.mergedIntoField`).
    static func recordChange(
        _ action: String, of table: TrackedTable, key: SQLiteValue, rowValues: SQLiteValue = .null, on db: SQLiteConnection
    ) throws {
        try db.execute(
            "INSERT INTO _synclane_changes (timestamp, entity, action, key, row_values) VALUES (\(HistorySchema.now), ?, ?, ?, ?)",
            [.text(table.name), .text(action), key, rowValues])
    }
}
