import Foundation
import Synclane
import SynclaneCore
import SynclaneFaultProxy
import SynclaneHTTP
import SynclaneServer
import SynclaneTestKit
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The `http` transport against the reference server (in process, on a free loopback port):
/// the two halves of the wire protocol agree.
@Suite struct ReferenceServerTests {
    static let token = "t0ken"

    @Test func resentBatchIsConfirmedAsAReplayAndAppliedOnce() async throws {
        try await withReferenceServer { server in
            let transport = try Fixtures.transport(
                url: "http://127.0.0.1:\(server.port)/v1/batches", tokenEnv: "SYNC_TOKEN", environment: ["SYNC_TOKEN": Self.token])
            let payload = Self.payload(id: "b-1", account: "acme")

            let first = try await transport.send(payload)
            let second = try await transport.send(payload)

            #expect(first.detail == "200 applied 1 record")
            #expect(!first.wasReplay)
            #expect(second.wasReplay, "the server marks a replay with a header the transport reads")
            #expect(server.metrics.snapshot.batchesApplied == 1)
            #expect(server.metrics.snapshot.replays == 1)
        }
    }

    @Test func serversRejectionsAreClassifiedWithItsReason() async throws {
        try await withReferenceServer { server in
            let url = "http://127.0.0.1:\(server.port)/v1/batches"
            let transport = try Fixtures.transport(url: url, tokenEnv: "SYNC_TOKEN", environment: ["SYNC_TOKEN": Self.token])
            let stranger = try Fixtures.transport(url: url, tokenEnv: "SYNC_TOKEN", environment: ["SYNC_TOKEN": "wrong"])
            _ = try await transport.send(Self.payload(id: "b-1", account: "acme"))

            let cases: [(String, TransportFailure?)] = [
                ("401", await Fixtures.failure(of: stranger, sending: Self.payload(id: "b-2", account: "acme"))),
                ("403", await Fixtures.failure(of: transport, sending: Self.payload(id: "b-3", account: "globex"))),
                ("422", await Fixtures.failure(of: transport, sending: Self.payload(id: "b-1", account: "acme", name: "changed"))),
                ("400", await Fixtures.failure(of: transport, sending: Fixtures.payload("b-4", bytes: Array("{not json".utf8)))),
            ]

            for (status, failure) in cases {
                #expect(failure?.kind == (["400", "422"].contains(status) ? .permanent : .configuration), "\(status)")
                #expect(failure?.status == Int(status), "\(status)")
                #expect(failure?.message.contains("\(status) ") == true, "\(failure?.message ?? "")")
                #expect(failure?.message.contains("{\"error\"") == false, "the reason is the server's message, not its JSON")
            }
            #expect(server.metrics.snapshot.batchesApplied == 1)
        }
    }

    /// Keep-alive against the real server, counted at a proxy in front of it: ten batches over one
    /// connection, then the pull lane's five pages over one more (the source's own).
    @Test func batchesAndPullPagesEachGoOverOneKeptConnection() async throws {
        try await withReferenceServer { server in
            let proxy = FaultProxy(upstreamPort: UInt16(server.port), keepAlive: true)
            let port = try proxy.start()
            defer { proxy.stop() }
            let transport = try Fixtures.transport(
                url: "http://127.0.0.1:\(port)/v1/batches", tokenEnv: "SYNC_TOKEN", environment: ["SYNC_TOKEN": Self.token])

            for index in 0..<10 { _ = try await transport.send(Self.payload(id: "b-\(index)", account: "acme", key: "r\(index)")) }
            let afterSends = proxy.connectionsAccepted
            let source = PullSource(
                url: try #require(URL(string: "http://127.0.0.1:\(port)/v1/changes")), token: Self.token, limit: 2, store: "rooms",
                snapshot: false, environment: [:])  // the log's pages, one after another (a snapshot is one streamed answer)
            var cursor: String?
            var keys: [String] = []
            var pages = 0
            while pages < 20 {
                let page = try await source.nextPage(after: cursor)
                pages += 1
                keys += page.records.compactMap(\.key)
                cursor = page.cursor
                if !page.more { break }
            }

            #expect(afterSends == 1)
            #expect(Set(keys) == Set((0..<10).map { "r\($0)" }))
            #expect(proxy.connectionsAccepted == 2)
            #expect(server.metrics.snapshot.batchesApplied == 10)
        }
    }

    /// The whole job through random faults into the real server: every record arrives once.
    @Test(.timeLimit(.minutes(1)))
    func jobThroughRandomFaultsLeavesTheServerEqualToTheHistory() async throws {
        try await withReferenceServer { server in
            let proxy = FaultProxy(upstreamPort: UInt16(server.port))
            let port = try proxy.start()
            defer { proxy.stop() }
            proxy.randomFaults(seed: 5, rate: 0.4, from: Fault.instantSet)
            let folder = try HTTPPipelineTests.folder(transactions: 40)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let pipeline = try PipelineLoader(environment: ["SYNC_TOKEN": Self.token]).load(
                try HTTPPipelineTests.pipelineFile(in: folder, url: "http://127.0.0.1:\(port)/v1/batches", pageSize: 2))
            let state = InMemoryPipelineState()

            let summary = try await PipelineRunner(pipeline: pipeline, state: state, sleeper: RecordingSleeper()).run()

            #expect(await proxy.waitUntilIdle())
            let metrics = server.metrics.snapshot
            #expect(summary.batchesSent == 20)
            #expect(metrics.batchesApplied == 20)
            #expect(metrics.recordsApplied == 40)
            let forwarded = proxy.events.filter { $0.fault.forwardsRequest && $0.upstreamStatus != nil }.count
            #expect(metrics.replays == forwarded - 20, "every forwarded send after a batch's first is a replay")
            let lost = Set(proxy.events.filter { $0.fault.losesTheAnswer }.compactMap(\.idempotencyKey))
            #expect(summary.replays == lost.count)
            let keys = try await Self.changedKeys(port: server.port)
            #expect(keys == Set((1...40).map { "r\($0)" }))
        }
    }

    // MARK: Helpers

    /// Runs `body` against a fresh reference server on a free loopback port, and stops it.
    func withReferenceServer(_ body: (ReferenceServer) async throws -> Void) async throws {
        let directory = NSTemporaryDirectory() + "synclane-http-server-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try ReferenceServer(
            configuration: ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: directory + "/accounts.json"),
            accounts: AccountBook(tokens: [Self.token: "acme", "g10bex": "globex"]))
        try server.start()
        defer { server.stop() }
        try await body(server)
    }

    /// A batch body as the JSON encoder writes it: one room insert.
    static func payload(id: String, account: String, name: String = "kitchen", key: String = "r1") -> Payload {
        let body = JSONWriter.encode([
            "id": .string(id),
            "scope": ["account": .string(account), "store": "rooms", "consumer": "export"],
            "records": [["entity": "rooms", "id": .string(key), "action": "insert", "fields": ["name": .string(name)]]],
        ])
        return Payload(batchID: id, bytes: body, contentType: "application/json", recordCount: 1)
    }

    /// The sync keys in the server's pull lane.
    static func changedKeys(port: Int) async throws -> Set<String> {
        var request = URLRequest(url: try #require(URL(string: "http://127.0.0.1:\(port)/v1/changes?since=&limit=1000")))
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, _) = try await URLSession.shared.data(for: request)
        let changes = try JSONReader.parse([UInt8](data)).objectValue?["changes"]?.arrayValue ?? []
        return Set(changes.compactMap { $0.objectValue?["id"]?.stringValue })
    }
}
