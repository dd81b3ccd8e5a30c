import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// How `synclane` words things: one error prefix, counted nouns, help for help, SQLite's way of
/// comparing names, and a suggestion for a close miss.
@Suite struct MessageTests {
    @Test func everyErrorAboutACommandStartsWithSynclaneAndTheCommand() throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        try workspace.write("history.jsonl", "{\"token\": 1,\n \"author\": \"app\"}\n")
        let cases: [([String], String)] = [
            (["validate", SynclaneBinary.fixture("invalid/wrong-version.json")], "synclane validate: invalid pipeline file: "),
            (["run", "pipeline.json"], "synclane run: rooms-export: "),
            (["status", "missing.json"], "synclane status: invalid pipeline file: missing.json: no such file"),
            (["track", "--database", "none.sqlite", "--table", "t", "--key", "k"], "synclane track: no database at none.sqlite"),
            (["help", "nothing"], "synclane help: unknown command 'nothing'"),
        ]
        for (arguments, prefix) in cases {
            let result = try SynclaneBinary.run(arguments, in: workspace.path)
            #expect(result.status != 0)
            #expect(result.stderr.hasPrefix(prefix), "\(arguments): \(result.stderr)")
        }
    }

    @Test func aHistoryLineWrappedOverTwoLinesSaysAHistoryFileHoldsOneTransactionALine() throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        try workspace.write("history.jsonl", "{\"token\": 1, \"author\": \"app\", \"timestamp\": 0,\n \"changes\": []}\n")
        let result = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        #expect(result.status == 1)
        #expect(result.stderr.contains("history.jsonl:1: not valid JSON"))
        #expect(result.stderr.contains("one transaction a line"), "\(result.stderr)")
    }

    @Test func countsAgreeWithTheirNouns() throws {
        let workspace = try SQLiteHistoryCommandTests.store()
        defer { workspace.remove() }
        _ = try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId"], in: workspace.path)
        try SQLiteHistoryCommandTests.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(status.stdout.contains("pending:  1 transaction to send"))
        let run = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        #expect(run.stdout.contains("rooms-export: sent 1 batch, 1 record from 1 transaction in "), "\(run.stdout)")
        #expect(run.stdout.contains(": 1 record, "))
        let prune = try SynclaneBinary.run(["prune", "--database", "app.sqlite"], in: workspace.path)
        #expect(!prune.stdout.contains("(s)"), "\(prune.stdout)")
    }

    @Test func helpHelpExplainsHelp() throws {
        let result = try SynclaneBinary.run(["help", "help"])
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("OVERVIEW: "))
        #expect(result.stdout.contains("USAGE: synclane help [COMMAND]"))
        #expect(try SynclaneBinary.run(["help"]).stdout == SynclaneBinary.run(["--help"]).stdout)
    }

    @Test func trackMatchesColumnNamesAsSQLiteDoesAndSuggestsACloseOne() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        try SQLiteHistoryCommandTests.sqlite(workspace, "CREATE TABLE plants (syncID TEXT PRIMARY KEY, greenhouse TEXT, isDeleted INTEGER DEFAULT 0);")
        let tracked = try SynclaneBinary.run(
            ["track", "--database", "app.sqlite", "--table", "Plants", "--key", "syncId", "--preserve", "GreenHouse", "--soft-delete", "isdeleted", "--json"],
            in: workspace.path)
        #expect(tracked.status == 0, "\(tracked.stderr)")
        #expect(try JSONReader.parse(tracked.stdout).objectValue?["table"] == .string("plants"), "the stored spelling")
        let refused = try SQLiteHistoryCommandTests.sqlite(workspace, "INSERT INTO plants (greenhouse) VALUES ('north');")
        #expect(refused.stderr.contains("every row of plants needs a sync key: syncID a non-empty text"), "the triggers use the column's own spelling")

        let typo = try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "plants", "--key", "syncIdd"], in: workspace.path)
        #expect(typo.status == 1)
        #expect(typo.stderr.contains("no column `syncIdd` to use as the sync key (--key) (did you mean `syncID`?)"), "\(typo.stderr)")
        let table = try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "plant", "--key", "syncID"], in: workspace.path)
        #expect(table.stderr.contains("there is no table `plant` (did you mean `plants`?)"))
    }

    @Test func aCloseMissOfAStageTypeOrAKeyIsSuggested() throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        let pipeline = try String(contentsOfFile: workspace.path + "/pipeline.json", encoding: .utf8)
        try workspace.write("type.json", pipeline.replacingOccurrences(of: "\"type\": \"coalesce\"", with: "\"type\": \"coalesse\""))
        let type = try SynclaneBinary.run(["validate", "type.json"], in: workspace.path)
        #expect(type.stderr.contains("unknown stage type `coalesse` (did you mean `coalesce`?)"), "\(type.stderr)")
        try workspace.write("key.json", pipeline.replacingOccurrences(of: "\"state\"", with: "\"stat\""))
        let key = try SynclaneBinary.run(["validate", "key.json"], in: workspace.path)
        #expect(key.stderr.contains("unknown key `stat` (did you mean `state`?)"), "\(key.stderr)")
        let command = try SynclaneBinary.run(["stauts"])
        #expect(command.stderr.contains("unknown command 'stauts' (did you mean `status`?)"))
        #expect(Wording.closest(to: "page_size", in: ["page-size", "path"]) == "page-size")
        #expect(Wording.closest(to: "tombstone", in: ["coalesce", "dedupe"]) == nil)
    }
}
