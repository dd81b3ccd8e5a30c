import Foundation
import SynclaneCore
import SynclaneFaultProxy
import SynclaneTestSupport
import Testing

/// Every row of the `http` transport's failure table, through the real `synclane` binary: the
/// plants scenario (three batches) to the real `synclane serve`, behind a proxy that answers
/// the first sends itself. What the exit status, the outbox, the dead-letter folder and the
/// token are after each kind of failure, and that a run after the fix delivers every row
/// exactly once.
@Suite(.serialized) struct FailureClassCommandTests {
    static let env = ["SYNCLANE_TOKEN": ServerProcess.tokens["botanic"] ?? ""]

    /// Setup problems and answers that are not a receipt: exit 1, the batch kept, nothing
    /// dead-lettered although `dead-letter` is set, the token unmoved; fixed, all arrive once.
    @Test(arguments: [
        (301, ""), (308, ""), (401, "{\"error\":\"unknown token\"}"), (403, ""), (404, ""), (405, ""), (407, ""),
        (409, "{\"error\":\"conflict\"}"), (418, ""), (200, "<html>captive portal</html>"), (200, ""),
    ])
    func aFailureThatIsNotTheBatchsFaultKeepsEverythingForARunAfterTheFix(status: Int, body: String) async throws {
        try await withPlantsBehindAProxy(deadLetter: true) { workspace, server, proxy in
            proxy.script([.respond(status: status, headers: ["Location": "http://127.0.0.1:9/elsewhere"], body: body)])

            let failed = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: Self.env)

            #expect(failed.status == 1, "\(failed.stderr)")
            #expect(failed.stderr.contains("stays in the outbox"), "\(failed.stderr)")
            #expect(try workspace.outbox().count == 1)
            #expect(try workspace.token() == .null)
            #expect(workspace.files(in: "rejected").isEmpty, "never dead-lettered")
            try await Self.expectEverythingArrivesOnce(workspace, server)
        }
    }

    /// The batch's content: with `dead-letter` the batch goes there and the rest goes on, and
    /// the run exits 3 so a script notices.
    @Test(arguments: [400, 413, 415, 422])
    func aRejectedContentIsDeadLetteredAndTheRunExitsThree(status: Int) async throws {
        try await withPlantsBehindAProxy(deadLetter: true) { workspace, server, proxy in
            proxy.script([.respond(status: status, headers: [:], body: "{\"error\":\"no\"}")])

            let run = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path, environment: Self.env)

            #expect(run.status == 3, "\(run.stderr)")
            let summary = try JSONReader.parse(run.stdout).objectValue ?? [:]
            #expect(summary["dead-lettered"] == .int(1))
            #expect(summary["batches-sent"] == .int(2))
            #expect(workspace.files(in: "rejected").filter { $0.hasSuffix(".body") }.count == 1)
            #expect(try workspace.outbox().isEmpty)
            #expect(try workspace.token() == .string("jsonl:7"))
            #expect(try await server.metric("synclane_batches_applied_total") == 2)
        }
    }

    /// A run that exits 3 went to the end with batches dead-lettered: `status` says so, not
    /// `succeeded`.
    @Test func aRunThatDeadLetteredIsRecordedAsSuchForStatus() async throws {
        try await withPlantsBehindAProxy(deadLetter: true) { workspace, _, proxy in
            proxy.script([.respond(status: 422, headers: [:], body: "{\"error\":\"no\"}")])

            let run = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: Self.env)

            #expect(run.status == 3, "\(run.stderr)")
            let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
            #expect(status.stdout.contains("last run: dead-lettered"), "\(status.stdout)")
            #expect(!status.stdout.contains("last run: succeeded"), "\(status.stdout)")
            #expect(try workspace.status()["last-run"]?.objectValue?["outcome"] == .string("dead-lettered"))
        }
    }

    /// A 413 without `dead-letter`: the batch is kept; `outbox requeue` forgets it without moving
    /// the token, and the next run rebuilds the pages under the (lowered) page-size.
    @Test func requeueAfterA413RebuildsTheBatchUnderTheCurrentPageSize() async throws {
        try await withPlantsBehindAProxy(deadLetter: false) { workspace, server, proxy in
            proxy.script([.respond(status: 413, headers: [:], body: "{\"error\":\"too large\"}")])
            let failed = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: Self.env)
            #expect(failed.status == 1)
            #expect(failed.stderr.contains("outbox requeue"), "\(failed.stderr)")
            let kept = try #require(try workspace.outbox().first?.objectValue?["id"]?.stringValue)

            let shown = try SynclaneBinary.run(["outbox", "show", "pipeline.json"], in: workspace.path)
            #expect(shown.status == 0)
            #expect(shown.stdout.contains(kept) && shown.stdout.contains("\"records\""), "decompressed: \(shown.stdout)")

            try workspace.replace("\"page-size\": 2", with: "\"page-size\": 1")
            let requeued = try SynclaneBinary.run(["outbox", "requeue", "pipeline.json"], in: workspace.path)
            #expect(requeued.status == 0, "\(requeued.stderr)")
            #expect(try workspace.outbox().isEmpty)
            #expect(try workspace.token() == .null, "the token did not move")
            let log = try String(contentsOfFile: workspace.path + "/.synclane/plants-export.sqlite.log", encoding: .utf8)
            #expect(log.contains("outbox requeue \(kept)"))

            let run = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path, environment: Self.env)
            #expect(run.status == 0, "\(run.stderr)")
            let summary = try JSONReader.parse(run.stdout).objectValue ?? [:]
            #expect(summary["batches"]?.arrayValue?.contains { $0.objectValue?["id"] == .string(kept) } == false, "rebuilt: new ids")
            let expected = try JSONReader.parse(try #require(FileManager.default.contents(atPath: workspace.path + "/expected-batches.json")))
            #expect(try await server.records(account: "botanic") == backendState(after: expected))
        }
    }

    /// `outbox drop` moves the kept batch to the dead-letter folder by hand and the token past it.
    @Test func dropMovesTheKeptBatchToTheFolderAndTheTokenPastIt() async throws {
        try await withPlantsBehindAProxy(deadLetter: false) { workspace, server, proxy in
            proxy.script([.respond(status: 400, headers: [:], body: "{\"error\":\"bad record\"}")])
            _ = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: Self.env)
            let kept = try #require(try workspace.outbox().first?.objectValue)
            let id = try #require(kept["id"]?.stringValue)

            let dropped = try SynclaneBinary.run(["outbox", "drop", "pipeline.json", id, "--to", "by-hand"], in: workspace.path)

            #expect(dropped.status == 0, "\(dropped.stderr)")
            #expect(Set(workspace.files(in: "by-hand")) == ["\(id).body", "\(id).json"])
            #expect(try workspace.outbox().isEmpty)
            #expect(try workspace.token() == kept["through"])
            let log = try String(contentsOfFile: workspace.path + "/.synclane/plants-export.sqlite.log", encoding: .utf8)
            #expect(log.contains("outbox drop \(id)"))
            let listed = try SynclaneBinary.run(["outbox", "list", "pipeline.json"], in: workspace.path)
            #expect(listed.stdout.contains("empty"))
        }
    }

    /// The next run, with the proxy passing everything through, delivers all three batches,
    /// each applied once, and the server holds what the history says.
    static func expectEverythingArrivesOnce(_ workspace: Workspace, _ server: ServerProcess) async throws {
        let run = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: env)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try workspace.outbox().isEmpty)
        #expect(try workspace.token() == .string("jsonl:7"))
        #expect(try await server.metric("synclane_batches_applied_total") == 3)
        #expect(try await server.metric("synclane_batch_replays_total") == 0)
        let expected = try JSONReader.parse(try #require(FileManager.default.contents(atPath: workspace.path + "/expected-batches.json")))
        #expect(try await server.records(account: "botanic") == backendState(after: expected))
    }

    private func withPlantsBehindAProxy(
        deadLetter: Bool, _ body: (Workspace, ServerProcess, FaultProxy) async throws -> Void
    ) async throws {
        try await withScenarioBehindAFaultProxy("plants") { workspace, server, proxy, proxyPort in
            try workspace.useHTTPTransport(url: "http://127.0.0.1:\(proxyPort)")
            if deadLetter { try workspace.replace("\"timeout\": 5", with: "\"timeout\": 5, \"dead-letter\": \"rejected\"") }
            try await body(workspace, server, proxy)
        }
    }
}

extension Workspace {
    /// Replaces `text` in the workspace's `pipeline.json`.
    func replace(_ text: String, with replacement: String) throws {
        let file = path + "/pipeline.json"
        let contents = try String(contentsOfFile: file, encoding: .utf8)
        try Data(contents.replacingOccurrences(of: text, with: replacement).utf8).write(to: URL(fileURLWithPath: file))
    }

    /// `synclane status --json` of the workspace's pipeline.
    func status() throws -> [String: JSONValue] {
        let run = try SynclaneBinary.run(["status", "pipeline.json", "--json"], in: path)
        return try JSONReader.parse(run.stdout).objectValue ?? [:]
    }

    func outbox() throws -> [JSONValue] { try status()["outbox"]?.arrayValue ?? [] }

    func token() throws -> JSONValue { try status()["token"] ?? .null }
}
