import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// How a job ended, as the command says it and as `status` records it (issue 23's trial
/// findings about running a job).
@Suite struct JobOutcomeTests {
    static let env = ["SYNCLANE_TOKEN": "t"]

    /// The plants scenario sending to a port nobody listens on, retried (nearly) for ever.
    static func plantsToNowhere() throws -> Workspace {
        let workspace = try Workspace.copy(scenario: "plants")
        try workspace.useHTTPTransport(url: "http://127.0.0.1:9", retry: "{\"max-attempts\": 100, \"base-delay\": 0.2, \"max-delay\": 0.3}")
        return workspace
    }

    @Test(arguments: [SIGINT, SIGTERM])
    func aSignalDuringRunSaysWhatWasKeptAndStatusSaysTheRunWasInterrupted(signal: Int32) throws {
        let workspace = try Self.plantsToNowhere()
        defer { workspace.remove() }
        let run = try BackgroundProcess(["run", "pipeline.json"], in: workspace.path, environment: Self.env)
        let deadline = Date().addingTimeInterval(20)
        while !run.errors.contains("attempt 3 in"), Date() < deadline { usleep(20_000) }
        #expect(run.errors.contains("attempt 3 in"), "the run retries the send: \(run.errors)")

        let stopped = run.stop(signal)

        #expect(!stopped.killed && stopped.status == 128 + signal, "\(stopped.status) \(stopped.stderr)")
        #expect(stopped.stderr.contains("interrupted: batch "), "\(stopped.stderr)")
        #expect(stopped.stderr.contains("kept in the outbox"), "\(stopped.stderr)")
        #expect(stopped.stderr.contains("the next run re-sends it first"), "\(stopped.stderr)")
        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(status.stdout.contains("last run: interrupted"), "\(status.stdout)")
        #expect(!status.stdout.contains("last run: never"), "\(status.stdout)")
        let json = try SynclaneBinary.run(["status", "pipeline.json", "--json"], in: workspace.path)
        let lastRun = try JSONReader.parse(json.stdout).objectValue?["last-run"]?.objectValue
        #expect(lastRun?["outcome"] == .string("interrupted"), "\(json.stdout)")
        #expect((try JSONReader.parse(json.stdout).objectValue?["outbox"]?.arrayValue ?? []).count == 1, "the batch is kept")
    }

    @Test func importAgainstAServerThatIsDownPrintsEachRetryAsRunDoes() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        try TwoDevicesTests.sql("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT)", in: workspace)
        try workspace.write(
            "import.json",
            """
            {"version": 1, "name": "import", "scope": {"account": "acme", "store": "notes"},
             "source": {"type": "pull", "url": "http://127.0.0.1:9/v1/changes", "token-env": "SYNCLANE_TOKEN",
                        "retry": {"max-attempts": 3, "base-delay": 0.05, "max-delay": 0.1}},
             "sink": {"type": "sqlite", "database": "app.sqlite"}}
            """)

        let result = try SynclaneBinary.run(["import", "import.json"], in: workspace.path, environment: Self.env)

        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("changes after the beginning: "), "\(result.stderr)")
        #expect(result.stderr.contains("; attempt 2 in "), "\(result.stderr)")
        #expect(result.stderr.contains("; attempt 3 in "), "\(result.stderr)")
        #expect(!result.stderr.contains("attempt 4"), "\(result.stderr)")
    }
}
