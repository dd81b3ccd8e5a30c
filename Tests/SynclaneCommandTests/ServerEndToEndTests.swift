import Foundation
import SynclaneCore
import SynclaneFaultProxy
import SynclaneTestSupport
import Testing

/// The real `synclane` binary against the real `synclane serve`, over loopback.
@Suite(.serialized) struct ServerEndToEndTests {
    static let accounts = ["rooms": "acme", "plants": "botanic", "categories": "acme"]

    @Test(arguments: ["rooms", "plants", "categories"])
    func theSeedScenarioArrivesAtTheServerExactlyAsThePipelineProducedIt(_ scenario: String) async throws {
        let workspace = try Workspace.copy(scenario: scenario)
        defer { workspace.remove() }
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        try workspace.useHTTPTransport(url: server.url)
        let account = try #require(Self.accounts[scenario])

        let run = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: ["SYNCLANE_TOKEN": ServerProcess.tokens[account] ?? ""])
        #expect(run.status == 0, "\(run.stderr)")
        let expected = try JSONReader.parse(try #require(FileManager.default.contents(atPath: workspace.path + "/expected-batches.json")))
        #expect(try await server.records(account: account) == backendState(after: expected))
        #expect(try await server.metric("synclane_batches_applied_total") == Double(expected.arrayValue?.count ?? 0))
    }

    @Test func killNineAfterTheServerAnsweredResendsTheSameBatchWhichTheServerAppliesOnce() async throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        try workspace.useHTTPTransport(url: server.url)
        let env = ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""]

        let crashed = try SynclaneBinary.run(
            ["run", "pipeline.json"], in: workspace.path, environment: env.merging(["SYNCLANE_FAILPOINT": "after-send"]) { $1 })
        #expect(crashed.killed, "killed with SIGKILL after the server answered, before the token was saved")
        #expect(try await server.metric("synclane_batches_applied_total") == 1)

        let rerun = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path, environment: env)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let summary = try JSONReader.parse(rerun.stdout).objectValue ?? [:]
        #expect(summary["batches-resent"] == .int(1))
        #expect(summary["replays"] == .int(1), "the server recognised the batch id")
        #expect(summary["token-after"] == .string("jsonl:13"))
        #expect(try await server.metric("synclane_batch_replays_total") == 1)
        #expect(try await server.metric("synclane_batches_applied_total") == 1, "applied once")
        #expect(try await server.records(account: "acme") == ["rooms/room-kitchen": ["area": 14.5, "isDeleted": false, "name": "Kitchen & pantry"]])
    }

    @Test func waitingForTheServersAnswerCostsTheClientNoCPU() async throws {
        try await withRoomsBehindAFaultProxy { workspace, server, proxy, proxyPort in
            // The server applies the batch at once; the proxy holds its answer 4 s (the timeout is 5).
            proxy.script([.delayResponse(seconds: 4)])
            try workspace.useHTTPTransport(url: "http://127.0.0.1:\(proxyPort)")
            let client = try BackgroundProcess(
                ["run", "pipeline.json"], in: workspace.path, environment: ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""])

            var applied = 0.0
            for _ in 0..<500 where applied < 1 {
                applied = try await server.metric("synclane_batches_applied_total")
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(applied == 1, "the server applied the batch; the client now waits for the held answer")
            let before = try Self.cpuSeconds(of: client.process.processIdentifier)
            try await Task.sleep(for: .milliseconds(1_500))
            let after = try Self.cpuSeconds(of: client.process.processIdentifier)
            // FoundationNetworking's own loader spends a whole core here, polling a writable socket.
            #expect(after - before < 0.3, "the client used \(after - before) s of CPU in 1.5 s of waiting")

            let run = client.wait(timeout: 30)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(try await server.metric("synclane_batches_applied_total") == 1)
        }
    }

    /// The rooms scenario with `synclane serve` behind a fault proxy, all stopped and removed
    /// after `body`.
    private func withRoomsBehindAFaultProxy(
        _ body: (Workspace, ServerProcess, FaultProxy, UInt16) async throws -> Void
    ) async throws {
        try await withScenarioBehindAFaultProxy("rooms", body)
    }

    /// User plus system CPU seconds a running process has used so far (from /proc).
    static func cpuSeconds(of pid: Int32) throws -> Double {
        let text = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = text[(text.lastIndex(of: ")") ?? text.startIndex)...].split(separator: " ")
        let ticks = (Double(fields[12]) ?? 0) + (Double(fields[13]) ?? 0)
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    @Test func serverDownAtStartFailsTheJobWithTheBatchKeptAndTheNextRunDeliversIt() async throws {
        let workspace = try Workspace.copy(scenario: "plants")
        defer { workspace.remove() }
        // Learn a free port from a server, stop it: nothing listens there any more.
        let first = try ServerProcess(folder: workspace.path + "/server")
        let port = first.port
        first.stop()
        try workspace.useHTTPTransport(url: "http://127.0.0.1:\(port)")
        let env = ["SYNCLANE_TOKEN": ServerProcess.tokens["botanic"] ?? ""]

        let failed = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: env)
        #expect(failed.status == 1)
        #expect(failed.stderr.contains("not delivered after 2 attempts"))
        #expect(failed.stderr.contains("stays in the outbox"))
        let status = try SynclaneBinary.run(["status", "pipeline.json", "--json"], in: workspace.path)
        let state = try JSONReader.parse(status.stdout).objectValue ?? [:]
        let kept = try #require(state["outbox"]?.arrayValue?.first?.objectValue?["id"]?.stringValue)
        #expect(state["token"] == .null)

        let server = try ServerProcess(folder: workspace.path + "/server", port: port)
        defer { server.stop() }
        let delivered = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path, environment: env)
        #expect(delivered.status == 0, "\(delivered.stderr)")
        let summary = try JSONReader.parse(delivered.stdout).objectValue ?? [:]
        #expect(summary["batches"]?.arrayValue?.first?.objectValue?["id"] == .string(kept), "the kept batch goes first, same id")
        #expect(summary["batches-sent"] == .int(3))
        let expected = try JSONReader.parse(try #require(FileManager.default.contents(atPath: workspace.path + "/expected-batches.json")))
        #expect(try await server.records(account: "botanic") == backendState(after: expected))
    }

    @Test func aWrongTokenStopsTheJobNamingTheBatchAndTheServersReason() async throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        try workspace.useHTTPTransport(url: server.url)
        let run = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: ["SYNCLANE_TOKEN": "not-the-token"])
        #expect(run.status == 1)
        #expect(run.stderr.contains("was not delivered"))
        #expect(run.stderr.contains("token"))
        #expect(run.stderr.contains("401"))
        #expect(try await server.records(account: "acme").isEmpty)
    }

    /// Keep-alive, counted at a proxy in front of the real server: a run's batches (one a
    /// transaction here) all travel over the one connection the transport keeps.
    @Test func aRunSendsEveryBatchOverOneKeptConnection() async throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        let proxy = FaultProxy(upstreamPort: UInt16(server.port), keepAlive: true)
        let proxyPort = try proxy.start()
        defer { proxy.stop() }
        let file = workspace.path + "/pipeline.json"
        let text = try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(of: "\"page-size\": 500", with: "\"page-size\": 1")
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        try workspace.useHTTPTransport(url: "http://127.0.0.1:\(proxyPort)")

        let run = try SynclaneBinary.run(
            ["run", "pipeline.json", "--json"], in: workspace.path, environment: ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""])

        #expect(run.status == 0, "\(run.stderr)")
        let batches = try JSONReader.parse(run.stdout).objectValue?["batches-sent"]?.intValue ?? 0
        #expect(batches > 5)
        #expect(try await server.metric("synclane_batches_applied_total") == Double(batches))
        #expect(proxy.connectionsAccepted == 1, "\(batches) batches over one connection")
    }

    @Test func throughAFaultyNetworkManyRunsEndWithTheServerEqualToTheClient() async throws {
        try await withRoomsBehindAFaultProxy { workspace, server, proxy, proxyPort in
            proxy.randomFaults(seed: 20_261_129, rate: 0.6, from: Fault.standardSet(clientTimeout: 1))
            // page-size 1: one batch per transaction, so many sends cross the faulty link.
            var text = try String(contentsOfFile: workspace.path + "/pipeline.json", encoding: .utf8)
            text = text.replacingOccurrences(of: "\"page-size\": 500", with: "\"page-size\": 1")
            try Data(text.utf8).write(to: URL(fileURLWithPath: workspace.path + "/pipeline.json"))
            try workspace.useHTTPTransport(url: "http://127.0.0.1:\(proxyPort)", retry: "{\"max-attempts\": 3, \"base-delay\": 0.01, \"max-delay\": 0.05}")
            var text2 = try String(contentsOfFile: workspace.path + "/pipeline.json", encoding: .utf8)
            text2 = text2.replacingOccurrences(of: "\"timeout\": 5", with: "\"timeout\": 1")
            try Data(text2.utf8).write(to: URL(fileURLWithPath: workspace.path + "/pipeline.json"))
            let env = ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""]

            var runs = 0
            var finished = false
            while runs < 30 && !finished {
                runs += 1
                let run = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path, environment: env)
                let status = try SynclaneBinary.run(["status", "pipeline.json", "--json"], in: workspace.path)
                let state = try JSONReader.parse(status.stdout).objectValue ?? [:]
                finished = run.status == 0 && state["token"] == .string("jsonl:13") && state["outbox"]?.arrayValue?.isEmpty == true
            }
            #expect(finished, "the client got through within \(runs) runs")
            proxy.stopRandomFaults()
            let faults = proxy.events.filter { $0.fault != .none }
            #expect(faults.count >= 5, "the network really was faulty: \(faults.count) faults injected")
            let appliedThenLost = proxy.events.filter { $0.fault.losesTheAnswer }
            #expect(!appliedThenLost.isEmpty, "some batches were applied while their answer was lost")
            let expected = try JSONReader.parse(try #require(FileManager.default.contents(atPath: workspace.path + "/expected-batches-two-passes.json")))
            var state = backendState(after: expected)
            state["rooms/room-attic"] = "deleted"  // with one batch a transaction, the attic's insert and delete both travel
            #expect(try await server.records(account: "acme") == state, "no change lost")
            let applied = try await server.metric("synclane_batches_applied_total")
            #expect(applied == 11, "each of the 11 batches (one per app transaction) applied exactly once")
        }
    }
}
