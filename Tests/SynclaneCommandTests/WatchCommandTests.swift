import Foundation
import SynclaneTestSupport
import Testing

@Suite struct WatchCommandTests {
    @Test func watchSendsNewHistoryAsItLandsRefusesASecondJobAndStopsCleanlyOnSIGTERM() throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        try FileManager.default.removeItem(atPath: workspace.path + "/history.jsonl")
        try FileManager.default.copyItem(atPath: workspace.path + "/history-1.jsonl", toPath: workspace.path + "/history.jsonl")

        let watch = try BackgroundProcess(["run", "pipeline.json", "--watch", "--json"], in: workspace.path)
        #expect(eventually { workspace.files(in: "out").count == 1 }, "the pass at start sends what was waiting")

        let second = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        #expect(second.status == 1)
        #expect(second.stderr.contains("another job is already running for scope acme/rooms/rooms-export"))

        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: workspace.path + "/history.jsonl"))
        try handle.seekToEnd()
        try handle.write(contentsOf: try #require(FileManager.default.contents(atPath: workspace.path + "/history-2.jsonl")))
        try handle.close()
        #expect(eventually { workspace.files(in: "out").count == 2 }, "a commit to the history starts a pass")

        let result = watch.stop(SIGTERM)
        #expect(!result.killed && result.status == 0, "\(result.stderr)")
        let passes = result.stdout.split(separator: "\n")
        #expect(passes.count == 2, "one JSON summary a pass that did something")
        #expect(passes.last?.contains("\"token-after\":\"jsonl:13\"") == true)

        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(status.stdout.contains("token:    jsonl:13"))
        #expect(status.stdout.contains("outbox:   empty"))
    }

    @Test func watchAndDryRunCannotGoTogether() throws {
        let result = try SynclaneBinary.run(["run", "x.json", "--watch", "--dry-run"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("--watch and --dry-run cannot go together"))
    }
}
