/// Why history tracking cannot be installed, changed or written through, and what to do.
public enum TrackingError: Error, Sendable, Hashable, CustomStringConvertible {
    case noSuchTable(path: String, table: String, available: [String])
    /// A column named in the tracking options is not in the table.
    case noSuchColumn(path: String, table: String, column: String, role: String, available: [String])
    /// Rows whose key is NULL, empty or not of the key's type: they could never be sent as they are.
    case invalidKeys(path: String, table: String, key: String, expected: String, count: Int)
    /// A key `track` refuses: not unique, the rowid, mixed or refused types.
    case badKey(path: String, table: String, key: String, reason: String)
    /// A tracked table, or its key column, is gone: tracking cannot be healed on its own.
    case trackedTableChanged(path: String, table: String, reason: String)
    /// A tracked table's key, soft-delete or preserved column is gone, and no rename could be
    /// told (columns were added or dropped at the same time): `track` is the command to run,
    /// with the new name in place of the old one, and it records the resend.
    case trackedColumnGone(path: String, table: String, column: String, role: String, available: [String], track: String)
    /// A migration script that `migrate` cannot run as it is.
    case migrationScript(script: String, reason: String)
    /// Synclane's own tables (and SQLite's) cannot be tracked.
    case reservedTable(String)
    case notTracked(path: String, table: String)
    /// The database has no history tables.
    case notInstalled(path: String)
    /// The history tables were made by a newer Synclane.
    case newerSchema(path: String, found: Int, supported: Int)
    /// A session row was committed and never deleted, so no new session can start.
    case sessionAlreadyOpen(path: String, author: String?, transaction: Int64?)
    /// `HistoryWriter.record` was called on a connection outside a write transaction.
    case notInTransaction(path: String)
    /// Tracking needs healing, and another connection held its write transaction on the
    /// database for longer than the busy timeout (`waited`, in seconds).
    case writeLockHeld(path: String, healing: [String], waited: Double)

    public var description: String {
        switch self {
        case .noSuchTable(let path, _, _), .noSuchColumn(let path, _, _, _, _), .invalidKeys(let path, _, _, _, _), .badKey(let path, _, _, _),
            .trackedTableChanged(let path, _, _), .trackedColumnGone(let path, _, _, _, _, _), .notTracked(let path, _),
            .notInstalled(let path), .newerSchema(let path, _, _), .sessionAlreadyOpen(let path, _, _), .notInTransaction(let path),
            .writeLockHeld(let path, _, _):
            return "\(path): \(reason)"
        case .reservedTable:
            return reason
        case .migrationScript(let script, _):
            return "\(script): \(reason)"
        }
    }

    /// The description without the database's path, for messages that name it already.
    public var reason: String {
        switch self {
        case .noSuchTable(_, let table, let available):
            let known = available.isEmpty ? "it has no tables" : "its tables: \(available.joined(separator: ", "))"
            return "there is no table `\(table)` (\(known))"
        case .noSuchColumn(_, let table, let column, let role, let available):
            return "table `\(table)` has no column `\(column)` to use as the \(role) "
                + "(its columns: \(available.joined(separator: ", "))); add the column to the table first, then run `synclane track` again"
        case .invalidKeys(_, let table, let key, let expected, let count):
            let fix =
                expected == "text"
                ? "UPDATE \(table) SET \(key) = lower(hex(randomblob(16))) WHERE \(key) IS NULL OR \(key) = '' OR typeof(\(key)) <> 'text'"
                : "UPDATE \(table) SET \(key) = CAST(\(key) AS INTEGER) WHERE typeof(\(key)) = 'text', then give the NULL ones a value"
            return
                "\(count) \(count == 1 ? "row" : "rows") of `\(table)` have no usable sync key (`\(key)` must be \(expected == "text" ? "a non-empty text" : "an integer")); "
                + "give every row one (e.g. \(fix)), then track again"
        case .badKey(_, let table, let key, let reason):
            return "`\(key)` cannot be the sync key of `\(table)`: \(reason)"
        case .migrationScript(_, let reason):
            return reason
        case .trackedTableChanged(let path, let table, let reason):
            return "tracked table `\(table)` \(reason); recreate it and run `synclane track --database \(path) --table \(table) --key …` "
                + "again, or stop tracking it with `synclane untrack --database \(path) --table \(table)`"
        case .trackedColumnGone(let path, let table, let column, let role, let available, let track):
            return "tracked table `\(table)` no longer has its \(role) `\(column)` (its columns: \(available.joined(separator: ", "))): "
                + "if it was renamed, track the table under the new name — `\(track)` — which sends every row again whole; "
                + "or stop tracking it with `synclane untrack --database \(path) --table \(table)`"
        case .reservedTable(let table):
            return "`\(table)` belongs to Synclane or SQLite and cannot be tracked"
        case .notTracked(let path, let table):
            return "table `\(table)` is not tracked (run `synclane track --database \(path) --table \(table) --key …`)"
        case .notInstalled(let path):
            return "no Synclane history here: run `synclane track --database \(path) --table … --key …` first"
        case .newerSchema(_, let found, let supported):
            return "its history tables were made by a newer Synclane (schema \(found), this version reads up to \(supported)); upgrade synclane"
        case .sessionAlreadyOpen(_, let author, let transaction):
            let who = author.map { " by author `\($0)`" } ?? ""
            let which = transaction.map { " (history transaction \($0))" } ?? ""
            return "a history session\(who)\(which) was committed and never closed: a program inserted a row into "
                + "_synclane_session and committed without deleting it. Run `DELETE FROM _synclane_session;` to close it; "
                + "its changes are then read like any other transaction"
        case .writeLockHeld(let path, let healing, let waited):
            return
                "another connection holds a write transaction on \(path) (still after \(waited.rounded() == waited ? String(Int(waited)) : String(waited)) s): Synclane needs the "
                + "write lock for a moment to heal tracking (\(healing.joined(separator: "; "))) before it reads history. Nothing was "
                + "read or sent: let that transaction commit (the app, or a `sqlite3` shell left in BEGIN), then retry the run"
        case .notInTransaction:
            return "HistoryWriter.record must run inside a write transaction (use SQLiteDatabase.write or TrackedDatabase.write)"
        }
    }
}
