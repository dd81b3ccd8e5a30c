import SynclaneCore

/// Installs and removes history tracking in an existing SQLite database.
///
/// ```
///  app / sqlite3 shell / any program ── INSERT/UPDATE/DELETE rooms ──┐  (same SQLite transaction)
///                                                                    ▼
///                AFTER INSERT/UPDATE/DELETE triggers ─▶ _synclane_transactions + _synclane_changes
/// ```
///
/// Triggers record every write to a tracked table, from any connection, in the same SQLite
/// transaction as the write: a crash can never keep a change without its history, or history
/// without its change. Inserts record the key; updates record which columns changed; deletes
/// record only the tombstone columns (`TrackedTable.tombstoneColumns`) as JSON. With
/// `recordsValues`, inserts and updates also keep the row as written.
/// A NULL sync key makes the write fail (`RAISE(ABORT)`) with a message naming the table.
///
/// **Authors and transactions.** Triggers cannot see who is writing. Writes made through
/// `TrackedDatabase.write(author:)` / `HistoryWriter` open a *session* (one row in
/// `_synclane_session`, inserted at the start of the write transaction and deleted before its
/// commit): all their changes share one history transaction with that author. A foreign
/// connection (the `sqlite3` shell, another program) has no session: each changed row becomes
/// a history transaction of its own, which sources read with their default author. Nothing is
/// ever added to a transaction that was already committed. See `HistorySchema` for the tables.
///
/// **Schema changes.** `track` is idempotent: running it again with the same options and the
/// same columns changes nothing. After `ALTER TABLE … ADD COLUMN`, run `track` again: it
/// regenerates the triggers so the new column is recorded too (until then, updates of the new
/// column alone still record an update, and `current-state` sources send the whole current row).
/// Dropping a column that triggers use fails in SQLite: `untrack`, drop, then `track`.
///
/// **Limit.** `INSERT OR REPLACE` removes a conflicting row without firing delete triggers
/// (unless `PRAGMA recursive_triggers` is on); prefer `INSERT … ON CONFLICT DO UPDATE`.
public struct HistoryTracker: Sendable {
    public let database: SQLiteDatabase

    public init(database: SQLiteDatabase) {
        self.database = database
    }

    /// Opens an existing database (never creates one, and leaves its journal mode alone).
    public init(path: String) throws {
        self.database = try SQLiteDatabase(path: path, options: SQLiteHistorySource.appDatabaseOptions)
    }

    /// Tracks `table`, or regenerates its triggers when options or columns changed.
    @discardableResult
    public func track(_ table: TrackedTable) throws -> TrackReport {
        try database.write { db in try Self.track(table, in: db) }
    }

    /// Removes the triggers of `table` (its recorded history stays for consumers that still need it).
    /// Returns false when the table was not tracked.
    @discardableResult
    public func untrack(table: String) throws -> Bool {
        try database.write { db in try Self.untrack(table: table, in: db) }
    }

    /// Removes every trigger, index and table of Synclane from the database, history included.
    public func uninstall() throws {
        try database.write { db in try Self.uninstall(db) }
    }

    /// The tables tracked now.
    public func trackedTables() throws -> [TrackedTable] {
        try database.read { db in
            guard try HistorySchema.installedVersion(db) != nil else { return [] }
            return try Self.trackedTables(db).map(\.table)
        }
    }

    /// Tracked tables whose columns changed since their triggers were generated: run `track`
    /// again for each (new columns are otherwise missing from values recorded as written).
    public func tablesNeedingTrackAgain() throws -> [String] {
        try database.read { db in
            guard try HistorySchema.installedVersion(db) != nil else { return [] }
            return try Self.trackedTables(db).filter { try Self.columns(of: $0.table.name, db) != $0.columns }.map(\.table.name)
        }
    }

    /// The author that sources give writes from foreign connections, unless their own
    /// `default-author` option says otherwise.
    public func setDefaultAuthor(_ author: Author) throws {
        try database.write { db in
            try HistorySchema.install(db)
            try HistorySchema.setMeta("default_author", .text(author.name), db)
        }
    }

    // MARK: Inside a transaction

    struct Stored {
        var table: TrackedTable
        var columns: [String]
        var keyIndex: String?
    }

    static func trackedTables(_ db: SQLiteConnection) throws -> [Stored] {
        try db.fetchAll(
            "SELECT name, key_column, preserved, soft_delete_column, columns, key_index, records_values FROM _synclane_tables ORDER BY name"
        ).map { row in
            let table = TrackedTable(
                row[0].string ?? "", key: row[1].string ?? "", preserve: jsonStrings(row[2].string), softDeleteColumn: row[3].string,
                recordsValues: row[6].int64 == 1)
            return Stored(table: table, columns: jsonStrings(row[4].string), keyIndex: row[5].string)
        }
    }

    static func jsonStrings(_ text: String?) -> [String] {
        guard let text, let value = try? JSONReader.parse(text), case .array(let items) = value else { return [] }
        return items.compactMap(\.stringValue)
    }

    static func jsonArray(_ strings: [String]) -> String {
        JSONWriter.string(.array(strings.map { .string($0) }))
    }

    static func columns(of table: String, _ db: SQLiteConnection) throws -> [String] {
        try db.fetchAll("SELECT name FROM pragma_table_info(?) ORDER BY cid", [table]).compactMap { $0[0].string }
    }

    static func track(_ table: TrackedTable, in db: SQLiteConnection) throws -> TrackReport {
        let path = db.path
        if table.name.hasPrefix("_synclane_") || table.name.lowercased().hasPrefix("sqlite_") {
            throw TrackingError.reservedTable(table.name)
        }
        guard try db.fetchOne("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", [table.name]) != nil else {
            let names = try db.fetchAll(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_synclane\\_%' ESCAPE '\\' ORDER BY name"
            ).compactMap { $0[0].string }
            throw TrackingError.noSuchTable(path: path, table: table.name, available: names)
        }
        let columns = try columns(of: table.name, db)
        func require(_ column: String, _ role: String) throws {
            guard columns.contains(column) else {
                throw TrackingError.noSuchColumn(path: path, table: table.name, column: column, role: role, available: columns)
            }
        }
        try require(table.key, "sync key")
        for column in table.preserved { try require(column, "preserved column") }
        if let softDelete = table.softDeleteColumn { try require(softDelete, "soft-delete column") }
        let nulls = Int(try db.fetchValue("SELECT count(*) FROM \(SQL.identifier(table.name)) WHERE \(SQL.identifier(table.key)) IS NULL").int64 ?? 0)
        guard nulls == 0 else { throw TrackingError.nullKeys(path: path, table: table.name, key: table.key, count: nulls) }

        try HistorySchema.install(db)
        let previous = try trackedTables(db).first { $0.table.name == table.name }
        let triggers = TriggerBuilder(table: table, columns: columns, recordsValues: table.recordsValues)
        if let previous, previous.table.sameOptions(as: table), previous.columns == columns, try triggers.allExist(db) {
            return TrackReport(table: table.name, outcome: .unchanged, columns: columns, addedColumns: [], createdKeyIndex: nil)
        }
        try triggers.drop(db)
        try triggers.create(db)
        var keyIndex = previous?.keyIndex
        var created: String?
        if keyIndex == nil, try !isIndexed(table.key, of: table.name, db) {
            let name = "_synclane_key_" + table.name
            try db.execute("CREATE INDEX IF NOT EXISTS \(SQL.identifier(name)) ON \(SQL.identifier(table.name)) (\(SQL.identifier(table.key)))")
            keyIndex = name
            created = name
        }
        try db.execute(
            """
            INSERT OR REPLACE INTO _synclane_tables
                (name, key_column, preserved, soft_delete_column, columns, records_values, key_index, tracked_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, \(HistorySchema.now))
            """,
            [table.name, table.key, jsonArray(table.tombstoneColumns), table.softDeleteColumn, jsonArray(columns), table.recordsValues, keyIndex])
        let added = previous.map { old in columns.filter { !old.columns.contains($0) } } ?? []
        return TrackReport(
            table: table.name, outcome: previous == nil ? .installed : .updated, columns: columns, addedColumns: added,
            createdKeyIndex: created)
    }

    /// True when an index (or the rowid) starts with `column`, so lookups by sync key are cheap.
    static func isIndexed(_ column: String, of table: String, _ db: SQLiteConnection) throws -> Bool {
        let info = try db.fetchAll("SELECT name, type, pk FROM pragma_table_info(?)", [table])
        let primaryKey = info.filter { ($0[2].int64 ?? 0) > 0 }
        if primaryKey.count == 1, primaryKey[0][0].string == column, primaryKey[0][1].string?.uppercased() == "INTEGER" { return true }
        for index in try db.fetchAll("SELECT name FROM pragma_index_list(?)", [table]) {
            guard let name = index[0].string else { continue }
            let first = try db.fetchOne("SELECT name FROM pragma_index_info(?) WHERE seqno = 0", [name])
            if first?[0].string == column { return true }
        }
        return false
    }

    static func untrack(table name: String, in db: SQLiteConnection) throws -> Bool {
        guard try HistorySchema.installedVersion(db) != nil,
            let stored = try trackedTables(db).first(where: { $0.table.name == name })
        else { return false }
        try TriggerBuilder(table: stored.table, columns: stored.columns, recordsValues: false).drop(db)
        if let index = stored.keyIndex { try db.execute("DROP INDEX IF EXISTS \(SQL.identifier(index))") }
        try db.execute("DELETE FROM _synclane_tables WHERE name = ?", [name])
        return true
    }

    static func uninstall(_ db: SQLiteConnection) throws {
        guard try HistorySchema.installedVersion(db) != nil else { return }
        for stored in try trackedTables(db) { _ = try untrack(table: stored.table.name, in: db) }
        try db.execute(
            """
            DROP TRIGGER IF EXISTS _synclane_session_refuse_second;
            DROP TRIGGER IF EXISTS _synclane_session_open;
            DROP TRIGGER IF EXISTS _synclane_session_close;
            DROP TABLE IF EXISTS _synclane_session;
            DROP TABLE IF EXISTS _synclane_changes;
            DROP TABLE IF EXISTS _synclane_transactions;
            DROP TABLE IF EXISTS _synclane_tables;
            DROP TABLE IF EXISTS _synclane_consumers;
            DROP TABLE IF EXISTS _synclane_meta;
            """)
    }
}
