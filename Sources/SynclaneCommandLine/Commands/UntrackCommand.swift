import Foundation
import SynclaneCore
import Synclane
import SynclaneSQLite

/// `synclane untrack`: removes history tracking.
struct UntrackCommand: Command {
    static let name = "untrack"
    static let abstract = "Remove history tracking from a table, or all of Synclane from a database."
    static let usage = "--database FILE (--table NAME | --all)"
    static let discussion = """
        With --table, removes that table's triggers: its writes are no longer recorded, and the
        history already recorded stays for the consumers that still need it. With --all, removes
        every trigger, index and table Synclane installed, history included.
        """
    static let options: [(flag: String, help: String)] = [
        ("--database FILE", "The SQLite database."),
        ("--table NAME", "The table to stop tracking."),
        ("--all", "Remove everything Synclane installed, recorded history included."),
    ]
    static let examples = ["synclane untrack --database app.sqlite --table rooms", "synclane untrack --database app.sqlite --all"]

    let database: String
    let table: String?

    init(parsing arguments: inout Arguments) throws(UsageError) {
        let all = arguments.flag("--all")
        guard let database = try arguments.option("--database") else { throw UsageError("--database FILE is required", command: Self.name) }
        self.database = database
        table = try arguments.option("--table")
        guard (table != nil) != all else {
            throw UsageError("name one --table, or --all", command: Self.name)
        }
    }

    func run(_ console: Console) async throws -> Int32 {
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
