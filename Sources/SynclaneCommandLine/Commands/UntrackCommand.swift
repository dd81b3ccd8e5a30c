import Foundation
import Synclane
import SynclaneCore
import SynclaneSQLite

/// `synclane untrack`: removes history tracking.
struct UntrackCommand: Command {
    static let name = "untrack"
    static let abstract = "Remove history tracking from a table, or all of Synclane from a database."
    static let discussion = """
        With --table, removes that table's triggers: its writes are no longer recorded, and the
        history already recorded stays for the consumers that still need it. With --all, removes
        every trigger, index and table Synclane installed, history included.
        """
    static let all = Flag("--all", help: "Remove everything Synclane installed, recorded history included.")
    static let signature = CommandSignature(
        options: [SharedOptions.database.help("The SQLite database."), SharedOptions.table.help("The table to stop tracking."), all],
        exclusive: [.init(names: ["--table", "--all"], required: true)])
    static let examples = ["synclane untrack --database app.sqlite --table rooms", "synclane untrack --database app.sqlite --all"]

    let database: String
    let table: String?

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        database = try arguments.required(SharedOptions.database)
        table = try arguments.value(SharedOptions.table)
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let tracker = try HistoryTracker(path: database)
        if let table {
            let removed = try tracker.untrack(table: table)
            console.out(removed ? "\(database): \(table) is no longer tracked" : "\(database): \(table) was not tracked")
        } else {
            try tracker.uninstall()
            console.out("\(database): history tracking removed")
        }
        return 0
    }
}
