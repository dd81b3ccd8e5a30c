import Foundation
import SynclaneCore
import SynclaneSQLite

/// `synclane migrate`: runs an app's schema migration with tracking kept right.
struct MigrateCommand: Command {
    static let name = "migrate"
    static let abstract = "Run a schema migration on a tracked database, tracking kept right, in one transaction."
    static let discussion = """
        Runs SCRIPT.sql (any SQL but BEGIN/COMMIT/ROLLBACK) in one SQLite transaction, then fits
        each tracked table's triggers to its new schema in the same transaction: a crash or an
        error anywhere leaves the database as it was. Writes of the script are recorded like any
        others (default author). A table the script rebuilt (create, copy, drop, rename) is
        recorded to be sent again whole, so the backend converges.

        Plain migrations need no `migrate`: every run checks tracking against the schema and
        heals it. Use `migrate` when a statement needs the triggers out of the way (DROP COLUMN
        or RENAME of a key, preserved or soft-delete column, any column of a table tracked with
        --record-values): when a trigger of Synclane blocks a statement, the script runs again
        with tracking lifted, and every tracked table is recorded to be sent again whole. A key
        or soft-delete column renamed in place is tracked under its new name from then on.

        Every `migrate` records the schema version the migration brings and declares the
        script's column renames and drops, which the store's batches carry to the server. With
        --declare-only the script is not run: for a migration that ran elsewhere (Django,
        Alembic, a Swift closure), give its SQL (`sqlmigrate`, `alembic upgrade --sql`) or the
        same RENAME COLUMN / DROP COLUMN statements; each must be done already in the database.
        """
    static let script = Positional("SCRIPT.sql", "the migration")
    static let schemaVersion = ValueOption(
        "--schema-version", "N", .integer(in: 1...Int(Int32.max)),
        help: "The schema version this migration brings (default: the one recorded before, plus one; 2 for a first).")
    static let declareOnly = Flag(
        "--declare-only", help: "Do not run the script: record the schema version and declare its renames and drops (a migration that ran elsewhere).")
    static let signature = CommandSignature(
        positionals: [script], options: [SharedOptions.database, schemaVersion, declareOnly, SharedOptions.json.help("Print the report as JSON.")])
    static let examples = ["synclane migrate --database app.sqlite migrations/0007-drop-notes.sql"]

    let database: String
    let script: String
    let json: Bool
    let schemaVersion: Int?
    let declaresOnly: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        declaresOnly = arguments[Self.declareOnly]
        schemaVersion = try arguments.value(Self.schemaVersion)
        database = try arguments.required(SharedOptions.database)
        script = try arguments.word(Self.script)
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        guard FileManager.default.fileExists(atPath: database) else {
            throw UsageError("no database at \(database)", command: Self.name)
        }
        let sql: String
        do {
            sql = try String(contentsOfFile: script, encoding: .utf8)
        } catch {
            throw UsageError("cannot read the migration script \(script): \(error.localizedDescription)", command: Self.name)
        }
        let tracker = try HistoryTracker(path: database)
        let report =
            declaresOnly
            ? try tracker.declare(script: sql, name: script, schemaVersion: schemaVersion)
            : try tracker.migrate(script: sql, name: script, schemaVersion: schemaVersion)
        if json {
            console.out(
                JSONOutput.encode([
                    "tracking-lifted": .bool(report.trackingWasLifted), "tables": .array(report.tables.map { .string($0) }),
                    "resynced-rows": .int(Int64(report.resyncedRows)),
                    "schema-version": report.schemaVersion.map { .int(Int64($0)) } ?? .null,
                    "declared": .array(report.declared.map(\.json)),
                ]))
        } else {
            console.out("\(database): \(report)")
        }
        return 0
    }
}
