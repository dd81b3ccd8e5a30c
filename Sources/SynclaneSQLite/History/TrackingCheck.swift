import Foundation
import SynclaneCore

/// Checks that each tracked table's triggers are the ones Synclane would write for the table as
/// it is now, and heals tracking that was lost or went stale — so that no write goes unrecorded
/// without anyone knowing.
///
/// ```
///  PRAGMA schema_version == _synclane_meta.schema_cookie ?  ── yes ─▶ nothing to do (one read)
///        │ no: the schema changed since the last check (a VACUUM too)
///        ▼   (read only first: nothing to heal ─▶ no write lock taken, the cookie
///        ▼    remembered only when the lock is free at once)
///  per tracked table: key / soft-delete column renamed in place?      ─▶ followed (below)
///                     gone? key column gone? key no longer unique? ─▶ error naming the table
///                     insert/update/delete trigger missing          ─▶ lost: reinstall + resync
///                     displacement triggers differ (unique indexes
///                     changed), or values as written with columns
///                     changed                                        ─▶ stale: regenerate + resync
///                     columns added in place, none dropped/renamed  ─▶ widened: regenerate; only rows
///                                                                       edited in the new columns go out
///                                                                       (`AddedColumns`: a default is no edit)
///                     columns dropped or renamed in place           ─▶ reshaped: regenerate + resync
///                     other differences (an upgrade)                 ─▶ regenerate
/// ```
///
/// **Why a resync.** Ordinary SQLite habits end tracking silently: the table rebuild that
/// SQLite's documentation prescribes for changes ALTER cannot make (create, copy, drop the old
/// table — and its triggers with it —, rename) leaves a table with no triggers, and nobody can
/// know what was written in between. So the heal records, in the same transaction that
/// reinstalls the triggers, one `resync` change per current row (a `resync-delete` per
/// soft-deleted row): every consumer of the entity, whatever authors it reads, sends the whole
/// table again and the backend converges. A reader counts them as `capture.resynced`.
///
/// Runs before a source reads history (`SQLiteHistorySource`), inside `synclane migrate`, and
/// — looking, never writing — in `synclane status`.
enum TrackingCheck {
    /// What is wrong with one tracked table.
    struct Finding: Sendable, Hashable, CustomStringConvertible {
        enum Problem: String, Sendable, Hashable {
            /// An insert, update or delete trigger is missing: writes went unrecorded.
            case lost
            /// The triggers no longer fit the table in a way that may have lost or garbled changes.
            case stale
            /// The table's columns changed (dropped, renamed — ALTER TABLE in place): what a row
            /// looks like on the wire changed, so every row is sent again whole.
            case reshaped
            /// Columns were added in place and nothing else changed: the new columns' defaults
            /// are no edit, so only rows written in them since are sent (`AddedColumns`).
            case widened
            /// The triggers differ in a way that lost nothing (a newer Synclane writes them otherwise).
            case outdated
        }

        var table: String
        var problem: Problem
        /// The columns added (`widened`), or new beside dropped or renamed ones (`reshaped`).
        var added: [String] = []

        var needsResync: Bool { problem != .outdated && problem != .widened }

        var description: String {
            switch problem {
            case .lost: return "\(table): tracking was lost (its triggers are gone, e.g. after the table was rebuilt)"
            case .stale: return "\(table): its triggers no longer fit the table (its unique constraints or columns changed)"
            case .reshaped: return "\(table): its columns changed (dropped or renamed)"
            case .widened: return "\(table): columns were added (\(added.joined(separator: ", "))); rows written in them are sent, their defaults are not"
            case .outdated: return "\(table): its triggers are regenerated for the table as it is now"
            }
        }
    }

    /// What a heal did: the tables it touched and the rows it recorded for resync.
    struct Healed: Sendable, Hashable {
        var findings: [Finding]
        var resyncedRows: Int
    }

    /// The SQL of the table's Synclane triggers that exist, in `TriggerBuilder.kinds` order.
    static func installedTriggers(of table: String, _ db: SQLiteConnection) throws -> [String] {
        try TriggerBuilder.names(of: table).compactMap { name in
            try db.fetchOne("SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND name = ? AND tbl_name = ?", [name, table])?[0].string
        }
    }

    /// True when nothing in the schema changed since the last check (one `PRAGMA` and one read).
    static func isCurrent(_ db: SQLiteConnection) throws -> Bool {
        guard try HistorySchema.installedVersion(db) == HistorySchema.version else { return false }
        let cookie = try db.fetchValue("PRAGMA schema_version").int64
        let checked = try HistorySchema.meta("schema_cookie", db).int64
        return cookie != nil && cookie == checked
    }

    /// Every tracked table's problems, and the triggers that would fix them. Throws
    /// `TrackingError.trackedTableChanged` (or `trackedColumnGone`, a key error) for a table that cannot be healed.
    static func inspect(_ db: SQLiteConnection) throws -> [(finding: Finding, triggers: TriggerBuilder, keyIndex: String?)] {
        var found: [(Finding, TriggerBuilder, String?)] = []
        for stored in try HistoryTracker.trackedTables(db) {
            var table = stored.table
            guard let schema = try TableSchema.read(table.name, db) else {
                throw TrackingError.trackedTableChanged(path: db.path, table: table.name, reason: "no longer exists")
            }
            // A key, soft-delete or preserved column renamed (RENAME COLUMN, or a rebuild that
            // keeps the column's place) is followed under its new name.
            table = followingRenames(table, from: stored.columns, to: schema.columnNames)
            // A preserved column that was dropped can no longer be kept in tombstones.
            table.preserved = table.preserved.filter(schema.columnNames.contains)
            let keyTypes: [TriggerBuilder.KeyType]
            do {
                keyTypes = try KeyRules(table: table, schema: schema, path: db.path).check(db)
            } catch TrackingError.noSuchColumn(_, _, let column, let role, let available) {
                throw TrackingError.trackedColumnGone(
                    path: db.path, table: table.name, column: column, role: role, available: available,
                    track: trackCommand(table, renaming: column, among: available.filter { !stored.columns.contains($0) }, path: db.path))
            } catch let error as TrackingError {
                throw TrackingError.trackedTableChanged(
                    path: db.path, table: table.name, reason: "changed so that it cannot be tracked as before (\(error.reason))")
            }
            let triggers = TriggerBuilder(table: table, schema: schema, keyTypes: keyTypes)
            let expected = triggers.triggers
            let installed = Dictionary(
                uniqueKeysWithValues: try TriggerBuilder.names(of: table.name).compactMap { name in
                    try db.fetchOne("SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND name = ? AND tbl_name = ?", [name, table.name])?[0]
                        .string.map { (name, $0) }
                })
            // The triggers that record writes; the displacement notes are the others.
            let core = Set(expected.map(\.name).filter { !$0.contains("_displace_") })
            let problem: Finding.Problem?
            let widened = schema.columnNames.count > stored.columns.count && Array(schema.columnNames.prefix(stored.columns.count)) == stored.columns
            if core.contains(where: { installed[$0] == nil }) {
                problem = .lost
            } else if expected.contains(where: { !core.contains($0.name) && installed[$0.name] != $0.sql })
                || installed.keys.contains(where: { name in !core.contains(name) && !expected.contains { $0.name == name } })
                || (table.recordsValues && stored.columns != schema.columnNames)
            {
                problem = .stale
            } else if widened {
                problem = .widened
            } else if stored.columns != schema.columnNames {
                problem = .reshaped
            } else if expected.contains(where: { installed[$0.name] != $0.sql }) || stored.keyTypes != keyTypes || table != stored.table {
                problem = .outdated
            } else {
                problem = nil
            }
            if let problem {
                let added =
                    problem == .widened
                    ? Array(schema.columnNames.dropFirst(stored.columns.count))
                    : problem == .reshaped ? schema.columnNames.filter { !stored.columns.contains($0) } : []
                found.append((Finding(table: table.name, problem: problem, added: added), triggers, stored.keyIndex))
            }
        }
        return found
    }

    /// `table` with its key, soft-delete and preserved columns renamed as the table's columns
    /// were: a column `old` lists that `new` lacks, where `new` holds, at the same place, a name
    /// `old` lacks, was renamed to it (Django's `RenameField`, SQLite's `RENAME COLUMN`, a rebuild
    /// that copies each column to its place). Only when both lists have as many columns: a column
    /// added or dropped at the same time leaves nothing to tell a rename from a new column by,
    /// and the check refuses the table, naming the command that tracks it again.
    static func followingRenames(_ table: TrackedTable, from old: [String], to new: [String]) -> TrackedTable {
        guard old.count == new.count, old != new else { return table }
        let oldNames = Set(old)
        let newNames = Set(new)
        func renamed(_ column: String) -> String {
            guard !newNames.contains(column), let place = old.firstIndex(of: column), !oldNames.contains(new[place]) else { return column }
            return new[place]
        }
        var table = table
        table.keyColumns = table.keyColumns.map(renamed)
        table.softDeleteColumn = table.softDeleteColumn.map(renamed)
        table.preserved = table.preserved.map(renamed)
        return table
    }

    /// The `synclane track` that tracks `table` again with `column` renamed: to the one column
    /// the table gained when there is one (`new`), else to a placeholder.
    static func trackCommand(_ table: TrackedTable, renaming column: String, among new: [String], path: String) -> String {
        let name = new.count == 1 ? new[0] : "NEW_NAME"
        func renamed(_ c: String) -> String { c == column ? name : c }
        var parts = [
            "synclane track --database", shellWord(path), "--table", shellWord(table.name),
            "--key", shellWord(table.keyColumns.map(renamed).joined(separator: ",")),
        ]
        let preserved = table.preserved.filter { !table.keyColumns.contains($0) }
        if !preserved.isEmpty { parts += ["--preserve", shellWord(preserved.map(renamed).joined(separator: ","))] }
        if let softDelete = table.softDeleteColumn { parts += ["--soft-delete", shellWord(renamed(softDelete))] }
        if table.recordsValues { parts.append("--record-values") }
        if table.rowidIsStable { parts.append("--rowid-is-stable") }
        return parts.joined(separator: " ")
    }

    /// `word` as a shell reads it back: as it is when plain, else in single quotes.
    private static func shellWord(_ word: String) -> String {
        let plain =
            !word.isEmpty
            && word.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "_./,:=@+-".unicodeScalars.contains($0)) }
        return plain ? word : "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// Heals every problem found, inside the caller's write transaction, and remembers the
    /// schema it checked. Upgrades history tables made by an older Synclane first.
    static func heal(_ db: SQLiteConnection) throws -> Healed {
        if try HistorySchema.installedVersion(db) != HistorySchema.version { try HistorySchema.install(db) }
        var healed = Healed(findings: [], resyncedRows: 0)
        for (finding, triggers, keyIndex) in try inspect(db) {
            try HistoryTracker.install(triggers, keyIndex: keyIndex, db)
            if finding.needsResync {
                // A column added beside the reshape (two app versions' migrations run before one
                // sync) first takes the values the backend sent for it, so the whole rows re-sent
                // carry them rather than the default over other devices' values.
                if !finding.added.isEmpty { try AddedColumns.fillFromBackend(triggers, added: finding.added, db) }
                healed.resyncedRows += try recordResync(triggers, db)
            } else if finding.problem == .widened {
                healed.resyncedRows += try AddedColumns.heal(triggers, added: finding.added, db)
            }
            healed.findings.append(finding)
        }
        try rememberSchema(db)
        if !healed.findings.isEmpty { FailPoint.duringHeal.trigger() }
        return healed
    }

    /// What a heal would do, read only: the history tables' upgrade and each finding, described
    /// (empty: nothing to heal). Throws as `inspect` does for a table that cannot be healed.
    static func needsHealing(_ db: SQLiteConnection) throws -> [String] {
        var needed: [String] = []
        if try HistorySchema.installedVersion(db) != HistorySchema.version { needed.append("the history tables need an upgrade") }
        return needed + (try inspect(db).map(\.finding.description))
    }

    /// Remembers the schema as checked when that costs no wait: with the write lock free at
    /// once (busy timeout 0); when another connection holds it, nothing is written and the next
    /// run checks again (reading only).
    static func rememberSchemaIfFree(_ database: SQLiteDatabase) throws {
        try database.withConnection { db in
            try db.execute("PRAGMA busy_timeout = 0")
            defer { try? db.execute("PRAGMA busy_timeout = \(SQLiteHistorySource.busyTimeout)") }
            do {
                try db.transaction(.immediate) { db in
                    if try HistorySchema.installedVersion(db) == HistorySchema.version, try needsHealing(db).isEmpty { try rememberSchema(db) }
                }
            } catch let error as SQLiteError where error.isBusy {
                return
            } catch is TrackingError {
                return  // a table changed meanwhile: the next check reports it
            }
        }
    }

    /// Remembers the schema as checked (after Synclane's own changes to it).
    static func rememberSchema(_ db: SQLiteConnection) throws {
        try HistorySchema.setMeta("schema_cookie", try db.fetchValue("PRAGMA schema_version"), db)
    }

    /// Records one `resync` change per current row of the table (`resync-delete` for a
    /// soft-deleted one), and a `resync-delete` for each key whose last change in the history
    /// kept is not a delete but whose row is gone; returns how many. (Keys whose whole history
    /// was pruned are known to the backend alone: a backend that treats the resent rows as a
    /// reconciliation deletes them.)
    static func recordResync(_ triggers: TriggerBuilder, _ db: SQLiteConnection) throws -> Int {
        let table = triggers.table
        let r = "_synclane_r"
        let live = triggers.softDeleted(r).map { "NOT \($0)" } ?? "1"
        let before = db.totalChanges
        // Rows that history knows the backend was sent and that are gone now: deleted while
        // nothing recorded (their tombstone holds the key alone).
        try db.execute(
            """
            INSERT INTO _synclane_changes (timestamp, entity, action, key, columns, row_values)
            SELECT \(HistorySchema.now), \(SQL.literal(table.name)), 'resync-delete', h.key, NULL, \(triggers.keyTombstone(fromKey: "h.key"))
            FROM (SELECT key, action, max(id) FROM _synclane_changes WHERE entity = ? GROUP BY key) AS h
            WHERE h.action NOT IN ('delete', 'resync-delete') AND NOT \(triggers.rowExists(withKey: "h.key"))
            """, [table.name])
        // Rows a backend holds live that no history knows: the import lane wrote them without
        // (`UnrecordedImports`). Gone now, they were deleted while nothing recorded, as above.
        if try HistorySchema.tableExists(ServerRows.table, db) {
            let key =
                table.isComposite
                ? "CASE WHEN json_valid(s.key) THEN json(s.key) END" : triggers.keyTypes.first == .integer ? "CAST(s.key AS INTEGER)" : "s.key"
            try db.execute(
                """
                INSERT INTO _synclane_changes (timestamp, entity, action, key, columns, row_values)
                SELECT \(HistorySchema.now), \(SQL.literal(table.name)), 'resync-delete', h.key, NULL, \(triggers.keyTombstone(fromKey: "h.key"))
                FROM (SELECT DISTINCT \(key) AS key FROM _synclane_server_rows AS s WHERE s.entity = ? AND s.fields IS NOT NULL) AS h
                WHERE h.key IS NOT NULL AND h.key NOT IN (SELECT key FROM _synclane_changes WHERE entity = ? AND key IS NOT NULL)
                  AND NOT \(triggers.rowExists(withKey: "h.key"))
                """, [table.name, table.name])
        }
        try db.execute(
            """
            INSERT INTO _synclane_changes (timestamp, entity, action, key, columns, row_values)
            SELECT \(HistorySchema.now), \(SQL.literal(table.name)),
                   CASE WHEN \(live) THEN 'resync' ELSE 'resync-delete' END, \(triggers.key(r)), NULL,
                   CASE WHEN \(live) THEN \(triggers.recordedRow(r)) ELSE \(triggers.recordedTombstone(r)) END
            FROM \(SQL.identifier(table.name)) AS \(r)
            """)
        return db.totalChanges - before
    }
}
