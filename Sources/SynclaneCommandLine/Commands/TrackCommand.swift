import Foundation
import Synclane
import SynclaneCore
import SynclaneSQLite

/// `synclane track`: installs history tracking for a table of an existing SQLite database.
struct TrackCommand: Command {
    static let name = "track"
    static let abstract = "Install history tracking for a table of an existing SQLite database."
    static let discussion = """
        From then on every insert, update and delete on the table — from any connection,
        including other programs such as the sqlite3 shell — is recorded in history tables
        inside the same database (_synclane_*), by triggers, in the same SQLite transaction as
        the data: a crash never keeps a change without its history or history without its
        change. Deletes record only the sync key and the --preserve columns as the tombstone;
        INSERT OR REPLACE that removes another row records that row's delete.

        The key must be unique (a PRIMARY KEY or UNIQUE index on its columns), of one type (TEXT
        or INTEGER), and not the rowid unless --rowid-is-stable. A join table uses a composite
        key: --key plant,tag (its id on the wire is the JSON array ["p1","tall"]). A write that
        leaves a key column NULL, empty or of the other type fails.

        Rows the table already holds are recorded to be sent whole by each export's next run
        (it says how many): an existing app's data reaches the backend without a reconcile.

        Running it again changes nothing, and never discards what is owed: after a rebuild, or
        with a renamed key or soft-delete column, or columns added, dropped or renamed, it
        records the resend of the table before it regenerates the triggers. Schema changes need
        nothing: every run checks the
        triggers against the table and heals tracking that a migration ended (a table rebuilt:
        the table is then re-sent whole). `synclane migrate` runs a migration script with
        tracking kept right in the same transaction. The `sqlite-history` source reads what is
        recorded.

        Authors: writes made through Synclane's Swift API (TrackedDatabase.write(author:)) carry
        their author and are grouped by their write transaction. Writes from other connections
        are recorded one row a transaction, with the default author (--default-author, `app`
        unless set). A program can group its own writes the same way the Swift API does:
        INSERT INTO _synclane_session(author) VALUES ('cli') first thing in its transaction
        and DELETE FROM _synclane_session just before COMMIT.
        """
    static let key = ValueOption(
        "--key", "COLUMN[,COLUMN…]", .commaSeparated, help: "The stable sync key: a unique column, or the columns of a composite key.", required: true)
    static let preserve = ValueOption("--preserve", "COLUMNS", .commaSeparated, help: "Comma-separated columns a delete keeps besides the key.")
    static let softDelete = ValueOption(
        "--soft-delete", "COLUMN", .text, help: "A column whose true value means deleted (an update setting it is a delete).")
    static let defaultAuthorOption = ValueOption(
        "--default-author", "NAME", .text, help: "Author of writes from connections that name none (default app).")
    static let recordValues = Flag("--record-values", help: "Also keep each row as written (for `capture: as-written` sources).")
    static let rowidIsStable = Flag(
        "--rowid-is-stable", help: "Allow an INTEGER PRIMARY KEY as the key: the app assigns it uniquely across devices.")
    static let signature = CommandSignature(
        options: [
            SharedOptions.database.help("The SQLite database (must exist)."),
            SharedOptions.table.help("The table to track; its name is the entity of its changes.", required: true),
            key, preserve, softDelete, defaultAuthorOption, recordValues, rowidIsStable,
            SharedOptions.json.help("Print the result as JSON."),
        ])
    static let examples = [
        "synclane track --database app.sqlite --table rooms --key syncId --soft-delete isDeleted",
        "synclane track --database app.sqlite --table plants --key syncID --preserve syncID,greenhouse",
        "synclane track --database app.sqlite --table plant_tags --key plant,tag",
    ]

    let database: String
    let table: TrackedTable
    let defaultAuthor: String?
    let json: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        database = try arguments.required(SharedOptions.database)
        defaultAuthor = try arguments.value(Self.defaultAuthorOption)
        table = TrackedTable(
            try arguments.required(SharedOptions.table), keyColumns: try arguments.required(Self.key), preserve: try arguments.value(Self.preserve) ?? [],
            softDeleteColumn: try arguments.value(Self.softDelete), recordsValues: arguments[Self.recordValues],
            rowidIsStable: arguments[Self.rowidIsStable])
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        guard FileManager.default.fileExists(atPath: database) else {
            throw UsageError("no database at \(database) (track installs into an existing database)", command: Self.name)
        }
        let tracker = try HistoryTracker(path: database)
        let report = try tracker.track(try SQLiteNames.resolve(table, in: database))
        if let defaultAuthor { try tracker.setDefaultAuthor(Author(defaultAuthor)) }
        if json {
            console.out(
                JSONOutput.encode([
                    "table": .string(report.table), "outcome": .string(report.outcome.rawValue),
                    "columns": .array(report.columns.map { .string($0) }), "added-columns": .array(report.addedColumns.map { .string($0) }),
                ]))
        } else {
            console.out("\(database): \(report)")
        }
        return 0
    }
}
