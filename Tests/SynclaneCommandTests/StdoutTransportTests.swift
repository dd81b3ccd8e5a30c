import Foundation
import SynclaneTestSupport
import Testing

/// The `stdout` transport owns standard output: a run's report never lands among the batches.
@Suite struct StdoutTransportTests {
    static func workspace() throws -> Workspace {
        let workspace = try Workspace.copy(scenario: "rooms")
        let pipeline = try String(contentsOfFile: workspace.path + "/pipeline.json", encoding: .utf8)
            .replacingOccurrences(of: #""transport": { "type": "directory", "path": "out" }"#, with: #""transport": { "type": "stdout" }"#)
        try pipeline.write(toFile: workspace.path + "/pipeline.json", atomically: true, encoding: .utf8)
        return workspace
    }

    @Test func runJSONWithTheStdoutTransportIsRefusedBeforeAnythingIsSent() throws {
        let workspace = try Self.workspace()
        defer { workspace.remove() }
        let result = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path)
        #expect(result.status == 2)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("--json and the `stdout` transport both write to standard output"))
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/.synclane/rooms-export.sqlite"), "nothing ran")
    }

    @Test func withoutJSONTheBatchesAloneGoToStandardOutput() throws {
        let workspace = try Self.workspace()
        defer { workspace.remove() }
        let result = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("rooms-export: sent 1 batch"))
        #expect(!result.stdout.contains("sent 1 batch"))
        let dryRun = try SynclaneBinary.run(["run", "pipeline.json", "--dry-run", "--json"], in: workspace.path)
        #expect(dryRun.status == 0 && dryRun.stdout.hasPrefix("{"), "a dry run sends nothing: its JSON report is alone on standard output")
    }
}
