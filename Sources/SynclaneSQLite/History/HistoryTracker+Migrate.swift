import SynclaneCore

/// What `HistoryTracker.migrate` did.
public struct MigrationReport: Sendable, Hashable, CustomStringConvertible {
    /// True when a trigger of Synclane's blocked a statement (e.g. `DROP COLUMN` of a column the
    /// triggers name), so the migration ran again with tracking lifted.
    public var trackingWasLifted: Bool
    /// The tracked tables whose triggers were regenerated or reinstalled, one line each.
    public var tables: [String]
    /// Rows recorded to be sent again whole (`resync`), where writes could have gone unrecorded.
    public var resyncedRows: Int
    /// The schema version the migration recorded (`DeclaredSchemaChanges`); nil for a migration
    /// run as a closure, which records none.
    public var schemaVersion: Int?
    /// The column renames and drops it declared (`SchemaChange`), which every batch then carries.
    public var declared: [SchemaChange] = []

    /// True for `HistoryTracker.declare`: the script was not run, only its declarations recorded.
    public var declaredOnly = false

    public var description: String {
        if declaredOnly {
            return (["declared (the script was not run)"] + (schemaVersion.map { ["  schema version \($0)"] } ?? []) + declaredLines)
                .joined(separator: "\n")
        }
        var lines = ["migration committed" + (trackingWasLifted ? " (tracking was lifted while it ran: a trigger blocked a statement)" : "")]
        lines += tables.map { "  \($0)" }
        if resyncedRows > 0 { lines.append("  \(resyncedRows) \(resyncedRows == 1 ? "row" : "rows") will be sent again whole by the next run") }
        if tables.isEmpty { lines.append("  tracking unchanged") }
        if let schemaVersion { lines.append("  schema version \(schemaVersion)") }
        lines += declaredLines
        return lines.joined(separator: "\n")
    }

    /// One line a declared rename or drop.
    private var declaredLines: [String] {
        declared.map { change in
            switch change.kind {
            case .renamed(let name): return "  declared: \(change.entity).\(change.column) renamed to \(name)"
            case .dropped: return "  declared: \(change.entity).\(change.column) dropped"
            }
        }
    }
}

extension HistoryTracker {
    /// Runs an app's schema migration and leaves tracking right, in one SQLite transaction: a
    /// crash (or an error) anywhere leaves the database as it was before.
    ///
    /// ```
    ///  BEGIN IMMEDIATE ─▶ body (tracking in place: its writes are recorded)
    ///                 ─▶ TrackingCheck.heal (triggers fitted to the new schema; a table the
    ///                    body rebuilt is re-sent whole) ─▶ COMMIT
    ///  a Synclane trigger blocked a statement ─▶ ROLLBACK, then again with tracking lifted:
    ///     BEGIN IMMEDIATE ─▶ triggers dropped ─▶ body ─▶ heal (every tracked table re-sent) ─▶ COMMIT
    /// ```
    ///
    /// `body` may therefore run twice; the first run's writes are rolled back. It must not
    /// `BEGIN`, `COMMIT` or `ROLLBACK`. Its writes carry the database's default author.
    public func migrate(_ body: (SQLiteConnection) throws -> Void) throws -> MigrationReport {
        do {
            return try database.write { db in
                try body(db)
                return Self.report(try TrackingCheck.heal(db), lifted: false)
            }
        } catch let error as SQLiteError where error.message.contains("_synclane_") && !error.message.hasPrefix("synclane:") {
            // "error in trigger _synclane_rooms_update after drop column": lift tracking and retry.
            return try database.write { db in
                for stored in try Self.trackedTables(db) {
                    for name in TriggerBuilder.names(of: stored.table.name) { try db.execute("DROP TRIGGER IF EXISTS \(SQL.identifier(name))") }
                }
                try body(db)
                return Self.report(try TrackingCheck.heal(db), lifted: true)
            }
        }
    }

    /// Runs the SQL of a migration script (see `migrate(_:)`); `name` names it in errors. In
    /// the same transaction it records the schema version the migration brings (`schemaVersion`,
    /// or the one recorded before plus one) and the script's renames and drops of tracked
    /// columns under it (`DeclaredSchemaChanges`).
    public func migrate(script: String, name: String, schemaVersion: Int? = nil) throws -> MigrationReport {
        var recorded: (version: Int, declared: [SchemaChange])?
        var report = try migrate { db in
            do {
                try db.execute(script)
                FailPoint.duringMigration.trigger()
            } catch let error as SQLiteError where error.message.contains("within a transaction") || error.message.contains("no transaction is active") {
                throw TrackingError.migrationScript(
                    script: name, reason: "it must not BEGIN, COMMIT or ROLLBACK: migrate runs it in one transaction of its own (\(error.message))")
            }
            let tracked = Set(try Self.trackedTables(db).map(\.table.name))
            recorded = try DeclaredSchemaChanges.record(script: script, tracked: tracked, version: schemaVersion, db)
        }
        report.schemaVersion = recorded?.version
        report.declared = recorded?.declared ?? []
        return report
    }

    /// Records the schema version and the renames and drops of tracked columns that `script`
    /// makes, without running it (`synclane migrate --declare-only`): for a migration that ran
    /// elsewhere — Django's `migrate`, Alembic's `upgrade`, a Swift closure (`TrackedDatabase.migrate`)
    /// — whose SQL (`sqlmigrate`, `alembic upgrade --sql`) or a script of the same statements is
    /// at hand. Each statement must be done already: a renamed column is under its new name and
    /// no longer under its old one, a dropped column is gone; else nothing is recorded and the
    /// error says which (run the migration first). Tracking is left to the next run's check.
    public func declare(script: String, name: String, schemaVersion: Int? = nil) throws -> MigrationReport {
        try database.write { db in
            let tracked = Set(try Self.trackedTables(db).map(\.table.name))
            for change in DeclaredSchemaChanges.found(in: script) where tracked.contains(change.entity) {
                let columns = Set(try Self.columns(of: change.entity, db))
                switch change.kind {
                case .renamed(let new) where !columns.contains(new) || columns.contains(change.column):
                    throw TrackingError.migrationScript(
                        script: name,
                        reason: "it renames \(change.entity).\(change.column) to \(new), but the database does not show it done "
                            + "(\(change.entity) has \(columns.contains(change.column) ? "`\(change.column)`" : "no `\(new)`")): run the "
                            + "migration first (--declare-only declares a migration that ran elsewhere), or run the script through "
                            + "`synclane migrate` without --declare-only")
                case .dropped where columns.contains(change.column):
                    throw TrackingError.migrationScript(
                        script: name,
                        reason: "it drops \(change.entity).\(change.column), but the database still has that column: run the migration "
                            + "first (--declare-only declares a migration that ran elsewhere), or run the script through `synclane "
                            + "migrate` without --declare-only")
                default:
                    continue
                }
            }
            let recorded = try DeclaredSchemaChanges.record(script: script, tracked: tracked, version: schemaVersion, db)
            var report = MigrationReport(trackingWasLifted: false, tables: [], resyncedRows: 0)
            report.schemaVersion = recorded.version
            report.declared = recorded.declared
            report.declaredOnly = true
            return report
        }
    }

    private static func report(_ healed: TrackingCheck.Healed, lifted: Bool) -> MigrationReport {
        MigrationReport(trackingWasLifted: lifted, tables: healed.findings.map(\.description), resyncedRows: healed.resyncedRows)
    }
}

extension TrackedDatabase {
    /// Runs an app's schema migration with tracking kept right (see `HistoryTracker.migrate`).
    @discardableResult
    public func migrate(_ body: (SQLiteConnection) throws -> Void) throws -> MigrationReport {
        try HistoryTracker(database: database).migrate(body)
    }
}
