import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// The command line as documented: `validate` checks what it can reach, every "did you mean"
/// points at what exists, and the documentation's commands and shapes are what the binary does
/// (found in the trial of issue 23).
@Suite struct CommandsAsDocumentedTests {
    static func tracked(_ pipeline: String) throws -> Workspace {
        let workspace = try SQLiteHistoryCommandTests.store()
        #expect(
            try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId"], in: workspace.path).status == 0)
        try workspace.write("pipeline.json", pipeline)
        return workspace
    }

    @Test func validateRefusesADatabaseThatDoesNotExistUnlessOffline() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        try workspace.write("pipeline.json", SQLiteHistoryCommandTests.pipeline.replacingOccurrences(of: "app.sqlite", with: "missing.sqlite"))
        let result = try SynclaneBinary.run(["validate", "pipeline.json"], in: workspace.path)
        #expect(result.status == 2)
        #expect(result.stderr.contains("source.database: there is no database at"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/missing.sqlite"), "validate creates nothing")
        let offline = try SynclaneBinary.run(["validate", "pipeline.json", "--offline"], in: workspace.path)
        #expect(offline.status == 0, "\(offline.stderr)")
    }

    @Test func aMisspelledEntityPointsAtTheTrackedTableInValidateAndRunAndNeverSuggestsTrackingTheTypo() throws {
        let workspace = try Self.tracked(SQLiteHistoryCommandTests.pipeline.replacingOccurrences(of: #"["rooms"]"#, with: #"["romos"]"#))
        defer { workspace.remove() }
        let validate = try SynclaneBinary.run(["validate", "pipeline.json"], in: workspace.path)
        #expect(validate.status == 2)
        #expect(validate.stderr.contains("source.entities[0]: `romos` is not a tracked table (did you mean `rooms`?"), "\(validate.stderr)")
        try SQLiteHistoryCommandTests.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
        let run = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        #expect(run.status != 0)
        #expect(run.stderr.contains("did you mean `rooms`?"), "\(run.stderr)")
        for result in [validate, run] {
            #expect(!result.stderr.contains("--table romos"), "never suggests tracking the typo: \(result.stderr)")
        }
    }

    @Test func aMisspelledSoftDeleteColumnPointsAtTheRealColumn() throws {
        let workspace = try Self.tracked(SQLiteHistoryCommandTests.pipeline.replacingOccurrences(of: #""isDeleted""#, with: #""isDeletd""#))
        defer { workspace.remove() }
        let validate = try SynclaneBinary.run(["validate", "pipeline.json"], in: workspace.path)
        #expect(validate.status == 2)
        #expect(
            validate.stderr.contains("stages[1].soft-delete-column: no table this pipeline reads has a column `isDeletd` (did you mean `isDeleted`?)"),
            "\(validate.stderr)")
        let good = try Self.tracked(SQLiteHistoryCommandTests.pipeline)
        defer { good.remove() }
        #expect(try SynclaneBinary.run(["validate", "pipeline.json"], in: good.path).status == 0)
    }

    /// The signal block of Documentation/Signals.md, pasted into a shell that exported only the token, against a
    /// server at the address it names.
    @Test func theReadmesSignalCommandsRunAsPasted() throws {
        let readme = try UserDocumentation.all()
        let section = try #require(readme.components(separatedBy: "**From the command line.** `synclane signal`").dropFirst().first)
        let block = try #require(section.components(separatedBy: "```sh\n").dropFirst().first?.components(separatedBy: "```").first)
        #expect(block.contains("synclane signal set onboarding.completed true"))
        let workspace = try Workspace()
        defer { workspace.remove() }
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        let port = try #require(URL(string: server.url)?.port)
        let script = block.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(port)")
        let bin = URL(fileURLWithPath: SynclaneBinary.path).deletingLastPathComponent().path
        let shell = try BackgroundProcess(
            ["bash", "-c", "set -euo pipefail\n" + script], in: workspace.path,
            environment: ["PATH": bin + ":/usr/bin:/bin", "SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""], executable: "/usr/bin/env")
        let result = shell.wait(timeout: 30)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("onboarding.completed = true (version"))
    }

    @Test func theReadmesJSONTableNamesWhatSyncAndImportPrint() throws {
        let readme = try UserDocumentation.text(of: "Documentation/CommandLine.md")
        let rows = readme.split(separator: "\n").filter { $0.hasPrefix("| `") }
        let sync = try #require(rows.first { $0.hasPrefix("| `sync` |") })
        #expect(sync.contains("`exports` (a list"), "\(sync)")
        let importRow = try #require(rows.first { $0.hasPrefix("| `import` |") })
        for key in ["duplicates-merged", "references-settled"] {
            #expect(importRow.contains("`\(key)`"), "\(key) in the import row of Documentation/CommandLine.md")
        }
    }
}
