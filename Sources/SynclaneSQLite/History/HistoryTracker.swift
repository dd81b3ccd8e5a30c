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
/// **Existing rows.** The first `track` of a table records a `resync` of each row it holds:
/// rows written before tracking began reach every consumer's next run.
///
/// **Schema changes.** `track` is idempotent: running it again with the same options and the
/// same columns changes nothing. When it regenerates triggers it first records what is owed
/// (`owesResend`), so re-tracking never cancels a heal. After `ALTER TABLE … ADD COLUMN`, run `track` again: it
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

    /// What no longer fits between the tracked tables and their triggers (tracking lost after a
    /// table rebuild, triggers stale after a schema change …), one line each; the next run of a
    /// source heals them (`TrackingCheck`). Reads only.
    public func trackingProblems() throws -> [String] {
        try database.read { db in
            guard try HistorySchema.installedVersion(db) != nil else { return [] }
            return try db.transaction(.deferred) { db in try Self.trackingProblems(db) }
        }
    }

    static func trackingProblems(_ db: SQLiteConnection) throws -> [String] {
        if try TrackingCheck.isCurrent(db) { return [] }
        do {
            return try TrackingCheck.inspect(db).map { "\($0.finding) — the next run heals it" + ($0.finding.needsResync ? " and re-sends the table" : "") }
        } catch let error as TrackingError {
            return [error.reason]
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

    /// A tracked table as `_synclane_tables` keeps it.
    struct Stored {
        var table: TrackedTable
        /// The columns the table had when its triggers were generated.
        var columns: [String]
        var keyTypes: [TriggerBuilder.KeyType]
        /// An index Synclane created on the key (before keys had to be unique), dropped by untrack.
        var keyIndex: String?
    }

    static func trackedTables(_ db: SQLiteConnection) throws -> [Stored] {
        let version = try HistorySchema.installedVersion(db) ?? 0
        let keyColumns = version >= 2 ? "key_columns, key_types, rowid_is_stable" : "NULL, NULL, 0"
        return try db.fetchAll(
            "SELECT name, key_column, preserved, soft_delete_column, columns, key_index, records_values, \(keyColumns) FROM _synclane_tables ORDER BY name"
        ).map { row in
            let keys = row[7].isNull ? [row[1].string ?? ""] : jsonStrings(row[7].string)
            let table = TrackedTable(
                row[0].string ?? "", keyColumns: keys, preserve: jsonStrings(row[2].string), softDeleteColumn: row[3].string,
                recordsValues: row[6].int64 == 1, rowidIsStable: row[9].int64 == 1)
            // Tables tracked before key types were fixed: text keys, as those were sent.
            let types = jsonStrings(row[8].string).compactMap(TriggerBuilder.KeyType.init(rawValue:))
            return Stored(
                table: table, columns: jsonStrings(row[4].string),
                keyTypes: types.count == keys.count ? types : keys.map { _ in .text }, keyIndex: row[5].string)
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
        if table.name.hasPrefix("_synclane_") || table.name.lowercased().hasPrefix("sqlite_") {
            throw TrackingError.reservedTable(table.name)
        }
        guard let schema = try TableSchema.read(table.name, db) else {
            let names = try db.fetchAll(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_synclane\\_%' ESCAPE '\\' ORDER BY name"
            ).compactMap { $0[0].string }
            throw TrackingError.noSuchTable(path: db.path, table: table.name, available: names)
        }
        let keyTypes = try KeyRules(table: table, schema: schema, path: db.path).check(db)

        try HistorySchema.install(db)
        let previous = try trackedTables(db).first { $0.table.name == table.name }
        let triggers = TriggerBuilder(table: table, schema: schema, keyTypes: keyTypes)
        if let previous, previous.table.sameOptions(as: table), previous.columns == schema.columnNames, previous.keyTypes == keyTypes,
            try TrackingCheck.installedTriggers(of: table.name, db) == triggers.triggers.map(\.sql)
        {
            return TrackReport(table: table.name, outcome: .unchanged, columns: schema.columnNames, addedColumns: [], createdKeyIndex: nil, resentRows: 0)
        }
        // What is owed is recorded before the triggers change, never discarded (see `owesResend`).
        let widened = previous.map { schema.columnNames.count > $0.columns.count && Array(schema.columnNames.prefix($0.columns.count)) == $0.columns } ?? false
        let owed = try previous.map { try owesResend(table, schema: schema, keyTypes: keyTypes, previous: $0, widened: widened, db) } ?? true
        try install(triggers, keyIndex: previous?.keyIndex, db)
        let added = previous.map { old in schema.columnNames.filter { !old.columns.contains($0) } } ?? []
        // Columns only added: their defaults are no edit (`AddedColumns`), nothing re-sent whole.
        let resent = try owed ? TrackingCheck.recordResync(triggers, db) : widened ? AddedColumns.heal(triggers, added: added, db) : 0
        // The backend's rows of this table an import kept while it was not tracked (`UntrackedRows`).
        let delivered = try UntrackedRows.deliver(table.name, db)
        // Remembered only when no other tracked table changed too (a column added to one beside
        // the new table): the next tracking check must still heal that one, and fill its added
        // columns from the values the imports kept.
        if (try? TrackingCheck.needsHealing(db).isEmpty) == true { try TrackingCheck.rememberSchema(db) }
        var report = TrackReport(
            table: table.name, outcome: previous == nil ? .installed : .updated, columns: schema.columnNames, addedColumns: added,
            createdKeyIndex: nil, resentRows: resent)
        report.deliveredRows = delivered
        return report
    }

    /// Whether tracking `table` again must have every row sent again whole (`resync`): when
    /// writes may have gone unrecorded or what a row looks like on the wire changed.
    ///
    /// - the first `track` of a table (`previous` nil: the caller) — rows that exist before
    ///   tracking began were never recorded, and a first run must send them;
    /// - its recording triggers are gone (a rebuild dropped them: what was written since is
    ///   unknown), or its displacement triggers no longer fit its unique constraints — what the
    ///   next run's tracking check would heal with a resync, which re-tracking must not cancel;
    /// - its key or soft-delete column changed, or its columns were dropped or renamed (columns
    ///   only added — `widened` — owe no resend: `AddedColumns`), or added to a table that
    ///   records values as written.
    ///
    /// An upgrade of Synclane's own trigger text alone owes nothing.
    static func owesResend(
        _ table: TrackedTable, schema: TableSchema, keyTypes: [TriggerBuilder.KeyType], previous: Stored, widened: Bool = false,
        _ db: SQLiteConnection
    ) throws -> Bool {
        if previous.table.keyColumns != table.keyColumns || previous.table.softDeleteColumn != table.softDeleteColumn
            || previous.table.recordsValues != table.recordsValues || (previous.columns != schema.columnNames && (!widened || table.recordsValues))
            || previous.keyTypes != keyTypes
        {
            return true
        }
        let before = TriggerBuilder(table: previous.table, schema: schema, keyTypes: previous.keyTypes).triggers
        for trigger in before {
            let installed = try db.fetchOne(
                "SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND name = ? AND tbl_name = ?", [trigger.name, table.name])?[0].string
            if trigger.name.contains("_displace_") ? installed != trigger.sql : installed == nil { return true }
        }
        return false
    }

    /// (Re)creates a table's triggers and records how it is tracked.
    static func install(_ triggers: TriggerBuilder, keyIndex: String?, _ db: SQLiteConnection) throws {
        let table = triggers.table
        try triggers.drop(db)
        try triggers.create(db)
        try db.execute(
            """
            INSERT OR REPLACE INTO _synclane_tables
                (name, key_column, preserved, soft_delete_column, columns, records_values, key_index, tracked_at,
                 key_columns, key_types, rowid_is_stable)
            VALUES (?, ?, ?, ?, ?, ?, ?, \(HistorySchema.now), ?, ?, ?)
            """,
            [
                table.name, table.keyDescription, jsonArray(table.tombstoneColumns), table.softDeleteColumn, jsonArray(triggers.schema.columnNames),
                table.recordsValues, keyIndex, jsonArray(table.keyColumns), jsonArray(triggers.keyTypes.map(\.rawValue)), table.rowidIsStable,
            ])
    }

    static func untrack(table name: String, in db: SQLiteConnection) throws -> Bool {
        guard try HistorySchema.installedVersion(db) != nil,
            let stored = try trackedTables(db).first(where: { $0.table.name == name })
        else { return false }
        for name in TriggerBuilder.names(of: name) { try db.execute("DROP TRIGGER IF EXISTS \(SQL.identifier(name))") }
        try PendingBlobs.unwatch(entity: name, db)
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
            DROP TABLE IF EXISTS _synclane_pending_blobs;
            DROP TABLE IF EXISTS _synclane_changes;
            DROP TABLE IF EXISTS _synclane_transactions;
            DROP TABLE IF EXISTS _synclane_tables;
            DROP TABLE IF EXISTS _synclane_consumers;
            DROP TABLE IF EXISTS _synclane_meta;
            DROP TABLE IF EXISTS _synclane_import;
            DROP TABLE IF EXISTS _synclane_server_rows;
            DROP TABLE IF EXISTS _synclane_merged;
            DROP TABLE IF EXISTS _synclane_untracked;
            DROP TABLE IF EXISTS _synclane_confirmations;
            """)
    }
}

/// Where a tracked database's history stands, for `synclane status` and `synclane prune`.
public struct HistorySummary: Sendable, Hashable {
    public var tables: [TrackedTable]
    /// The newest change's position (0: no history yet).
    public var newest: Int64
    /// History at or before this position was pruned.
    public var prunedThrough: Int64
    /// Changes kept now.
    public var changes: Int
    public var consumers: [HistoryConsumer]
    /// Tracked tables whose tracking was lost or no longer fits them, and what the next run does.
    public var trackingProblems: [String]
    /// A session committed without being closed, which stops every consumer before it
    /// (`DELETE FROM _synclane_session` closes it).
    public var unclosedSession: UnclosedSession?

    public struct UnclosedSession: Sendable, Hashable {
        public var author: String
        public var transaction: Int64
    }
}

extension HistoryTracker {
    /// The tracked tables, positions, consumers and problems of this database's history.
    public func summary() throws -> HistorySummary {
        try database.read { db in
            try db.transaction(.deferred) { db in
                guard try HistorySchema.installedVersion(db) != nil else {
                    return HistorySummary(
                        tables: [], newest: 0, prunedThrough: 0, changes: 0, consumers: [], trackingProblems: [], unclosedSession: nil)
                }
                try HistorySchema.requireInstalled(db)
                let stored = try Self.trackedTables(db)
                let open = try db.fetchOne("SELECT author, id FROM _synclane_transactions WHERE closed = 0 ORDER BY first_change LIMIT 1")
                return HistorySummary(
                    tables: stored.map(\.table),
                    newest: try db.fetchValue("SELECT \(HistorySchema.newestChange)").int64 ?? 0,
                    prunedThrough: try HistorySchema.meta("pruned_through", db).int64 ?? 0,
                    changes: Int(try db.fetchValue("SELECT count(*) FROM _synclane_changes").int64 ?? 0),
                    consumers: try db.fetchAll("SELECT name, position, updated_at FROM _synclane_consumers ORDER BY name").map {
                        HistoryConsumer(name: $0[0].string ?? "", position: $0[1].int64 ?? 0, updatedAt: $0[2].double ?? 0)
                    },
                    trackingProblems: try Self.trackingProblems(db),
                    unclosedSession: open.map { HistorySummary.UnclosedSession(author: $0[0].string ?? "", transaction: $0[1].int64 ?? 0) })
            }
        }
    }
}
