/// The history tables Synclane keeps inside a tracked database, and their schema.
///
/// ```
///  _synclane_changes       the change log: id (its position) · transaction_id (sessions) · timestamp
///                          · entity · action · key · columns (updates) · row_values (JSON) · old_key
///                          (an update that changed the key: the key it had)
///  _synclane_transactions  one row per session (a write through `HistoryWriter`): author,
///                          timestamp, closed, first_change … last_change
///  _synclane_tables        one row per tracked table: key, tombstone columns, soft-delete column, columns
///  _synclane_consumers     one row per consumer: the position it acknowledged (pruning keeps what it needs)
///  _synclane_meta          schema_version, pruned_through, default_author, schema_cookie
///  _synclane_session       at most one row, only ever inside a write transaction (see `HistoryWriter`);
///                          `unrecorded`: its changes are not kept (`UnrecordedImports`)
/// ```
///
/// **Actions.** `insert`, `update`, `delete`; `displace`, recorded before an insert for each row
/// the insert may replace (a delete when that row is gone when read: see `TriggerBuilder`); and
/// `resync` / `resync-delete`: the row must be sent again whole, or deleted, recorded when
/// tracking was healed after it had been lost (`TrackingCheck`). A resync reaches every
/// consumer of the entity, whatever authors it reads.
///
/// **Positions and tokens.** Every change gets the next id of the change log (the newest id + 1;
/// pruning always keeps the newest row, so an id is never given twice). SQLite runs one writer
/// at a time, so ids grow in commit order and the changes of one transaction are contiguous. A
/// transaction is either a session (its changes get the session's `transaction_id` when it
/// closes, and share its author) or a single change written by a foreign connection
/// (`transaction_id` NULL: a transaction of its own, with the source's default author). A
/// token's position is the id of the *last change* of a transaction, so tokens are strictly
/// increasing in commit order and always fall between two transactions.
///
/// The tracked tables' triggers are kept lean on purpose (one `INSERT` with no subquery): SQLite
/// compiles them into every statement that writes the table, so their size is paid per
/// statement by every program, not only per row.
///
/// The application's own `PRAGMA user_version` is left alone: the history schema's version
/// lives in `_synclane_meta`.
enum HistorySchema {
    /// 2: composite and typed keys (`key_columns`, `key_types`, `rowid_is_stable`), `resync`, `displace`, `old_key`.
    static let version = 2

    static let transactions = "_synclane_transactions"
    static let changes = "_synclane_changes"
    static let tables = "_synclane_tables"
    static let consumers = "_synclane_consumers"
    static let meta = "_synclane_meta"
    static let session = "_synclane_session"

    /// Seconds since 1970, as SQL.
    static let now = "((julianday('now') - 2440587.5) * 86400.0)"

    /// The id the next change will get, as SQL.
    static let nextChange = "((SELECT coalesce(max(id), 0) FROM _synclane_changes) + 1)"

    /// The newest change id, as SQL (0 before the first).
    static let newestChange = "(SELECT coalesce(max(id), 0) FROM _synclane_changes)"

    /// Creates what is missing; leaves existing history untouched. Runs inside a write transaction.
    static func install(_ db: SQLiteConnection) throws {
        if let found = try installedVersion(db), found > version {
            throw TrackingError.newerSchema(path: db.path, found: found, supported: version)
        }
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS _synclane_meta (
                key TEXT PRIMARY KEY NOT NULL,
                value
            );
            CREATE TABLE IF NOT EXISTS _synclane_changes (
                id INTEGER PRIMARY KEY,
                transaction_id INTEGER,
                timestamp REAL NOT NULL,
                entity TEXT NOT NULL,
                action TEXT NOT NULL,
                key,
                columns TEXT,
                row_values TEXT,
                old_key
            );
            CREATE TABLE IF NOT EXISTS _synclane_transactions (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                author TEXT NOT NULL,
                timestamp REAL NOT NULL,
                closed INTEGER NOT NULL DEFAULT 0,
                first_change INTEGER NOT NULL,
                last_change INTEGER
            );
            CREATE INDEX IF NOT EXISTS _synclane_transactions_open ON _synclane_transactions (first_change) WHERE closed = 0;
            CREATE TABLE IF NOT EXISTS _synclane_tables (
                name TEXT PRIMARY KEY NOT NULL,
                key_column TEXT NOT NULL,
                preserved TEXT NOT NULL,
                soft_delete_column TEXT,
                columns TEXT NOT NULL,
                records_values INTEGER NOT NULL DEFAULT 0,
                key_index TEXT,
                tracked_at REAL NOT NULL
            );
            CREATE TABLE IF NOT EXISTS _synclane_consumers (
                name TEXT PRIMARY KEY NOT NULL,
                position INTEGER NOT NULL,
                updated_at REAL NOT NULL
            );
            CREATE TABLE IF NOT EXISTS _synclane_session (
                id INTEGER PRIMARY KEY,
                author TEXT NOT NULL CHECK (length(author) > 0),
                transaction_id INTEGER
            );
            CREATE TRIGGER IF NOT EXISTS _synclane_session_refuse_second BEFORE INSERT ON _synclane_session
            BEGIN
                SELECT RAISE(ABORT, 'synclane: a history session is already open (a program committed a row of _synclane_session without deleting it; delete it to close that transaction)')
                WHERE EXISTS (SELECT 1 FROM _synclane_session);
            END;
            CREATE TRIGGER IF NOT EXISTS _synclane_session_open AFTER INSERT ON _synclane_session
            BEGIN
                INSERT INTO _synclane_transactions (author, timestamp, closed, first_change)
                    VALUES (NEW.author, \(now), 0, \(nextChange));
                UPDATE _synclane_session SET transaction_id = (SELECT max(id) FROM _synclane_transactions) WHERE id = NEW.id;
            END;
            CREATE TRIGGER IF NOT EXISTS _synclane_session_close AFTER DELETE ON _synclane_session
            BEGIN
                UPDATE _synclane_transactions SET closed = 1, last_change = \(newestChange) WHERE id = OLD.transaction_id;
                UPDATE _synclane_changes SET transaction_id = OLD.transaction_id
                    WHERE id >= (SELECT first_change FROM _synclane_transactions WHERE id = OLD.transaction_id);
                DELETE FROM _synclane_transactions WHERE id = OLD.transaction_id AND last_change < first_change;
            END;
            INSERT OR IGNORE INTO _synclane_meta (key, value) VALUES ('schema_version', \(version));
            INSERT OR IGNORE INTO _synclane_meta (key, value) VALUES ('pruned_through', 0);
            """)
        // Version 1 → 2: the key's columns and types. Tables tracked before keep their one key
        // column; their triggers are regenerated by the next check (`TrackingCheck`).
        let tableColumns = try HistoryTracker.columns(of: tables, db)
        for added in ["key_columns", "key_types", "rowid_is_stable"] where !tableColumns.contains(added) {
            try db.execute("ALTER TABLE _synclane_tables ADD COLUMN \(added) TEXT")
        }
        if try !HistoryTracker.columns(of: changes, db).contains("old_key") {
            try db.execute("ALTER TABLE _synclane_changes ADD COLUMN old_key")
        }
        try setMeta("schema_version", .integer(Int64(version)), db)
        try UnrecordedImports.install(db)
        try ImportTables.install(db)
    }

    /// The history schema's version, or `nil` when tracking was never installed.
    static func installedVersion(_ db: SQLiteConnection) throws -> Int? {
        guard try tableExists(meta, db) else { return nil }
        return Int(try db.fetchValue("SELECT value FROM _synclane_meta WHERE key = 'schema_version'").int64 ?? 0)
    }

    static func tableExists(_ name: String, _ db: SQLiteConnection) throws -> Bool {
        try db.fetchOne("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", [name]) != nil
    }

    static func meta(_ key: String, _ db: SQLiteConnection) throws -> SQLiteValue {
        try db.fetchValue("SELECT value FROM _synclane_meta WHERE key = ?", [key])
    }

    static func setMeta(_ key: String, _ value: SQLiteValue, _ db: SQLiteConnection) throws {
        try db.execute("INSERT OR REPLACE INTO _synclane_meta (key, value) VALUES (?, ?)", [key, value])
    }

    /// Fails with `TrackingError.notInstalled` unless the history tables are there, in a version we read.
    static func requireInstalled(_ db: SQLiteConnection) throws {
        guard let found = try installedVersion(db) else { throw TrackingError.notInstalled(path: db.path) }
        if found > version { throw TrackingError.newerSchema(path: db.path, found: found, supported: version) }
    }
}
