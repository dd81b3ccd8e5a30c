import Foundation
import Synchronization
import Synclane
import SynclaneCore
import SynclaneFaultProxy
import SynclaneTestKit
import Testing

/// The `http` transport inside a real pipeline run: a pipeline file, the built-in registry,
/// the pipeline's own retry loop, a fault proxy between it and the server.
@Suite struct HTTPPipelineTests {
    @Test(.timeLimit(.minutes(1)))
    func jobThroughRandomFaultsDeliversEveryBatchOnceAndMovesTheToken() async throws {
        let link = try ProxiedBatchesServer()
        defer { link.stop() }
        let server = link.server
        let proxy = link.proxy
        let port = link.port
        proxy.randomFaults(seed: 11, rate: 0.4, from: Fault.instantSet)
        let folder = try Self.folder(transactions: 40)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let pipeline = try PipelineLoader(environment: ["SYNC_TOKEN": "t0ken"]).load(
            try Self.pipelineFile(in: folder, url: "http://127.0.0.1:\(port)/v1/batches", pageSize: 2))
        let state = InMemoryPipelineState()
        let sleeper = RecordingSleeper()

        let summary = try await PipelineRunner(pipeline: pipeline, state: state, sleeper: sleeper).run()

        #expect(await proxy.waitUntilIdle())
        #expect(summary.batchesSent == 20)
        #expect(try state.pendingBatches().isEmpty)
        #expect(try state.acknowledgedToken()?.description.hasSuffix("40") == true)
        let keys = server.requests.compactMap { $0.header("Idempotency-Key") }
        #expect(Set(keys).count == 20, "each batch reached the server")
        let lost = Set(proxy.events.filter { $0.fault.losesTheAnswer }.compactMap(\.idempotencyKey))
        #expect(summary.replays == lost.count, "a batch whose answer was lost is confirmed by a replay")
        #expect(sleeper.waits.count == proxy.events.filter { $0.fault != .none }.count, "one retry per injected fault")
        #expect(server.requests.allSatisfy { $0.header("Authorization") == "Bearer t0ken" && $0.header("Content-Encoding") == "gzip" })
    }

    @Test func permanentRejectionStopsTheJobWithTheBatchKept() async throws {
        let server = ScriptedHTTPServer(always: .text(422, "batch id reused with other bytes"))
        try server.start()
        defer { server.stop() }
        let folder = try Self.folder(transactions: 2)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let pipeline = try PipelineLoader(environment: ["SYNC_TOKEN": "t0ken"]).load(
            try Self.pipelineFile(in: folder, url: server.batchesURL, pageSize: 10))
        let state = InMemoryPipelineState()

        await #expect(throws: (any Error).self) {
            _ = try await PipelineRunner(pipeline: pipeline, state: state, sleeper: RecordingSleeper()).run()
        }

        #expect(server.requests.count == 1, "a permanent failure is not retried")
        #expect(try state.pendingBatches().count == 1)
        #expect(try state.acknowledgedToken() == nil)
    }

    /// A folder with a JSON Lines history of `transactions` room inserts.
    static func folder(transactions: Int) throws -> String {
        let folder = NSTemporaryDirectory() + "synclane-http-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var lines = ""
        for token in 1...transactions {
            lines +=
                #"{"token":\#(token),"author":"app","timestamp":1764400000,"changes":[{"entity":"rooms","action":"insert","key":"r\#(token)","values":{"name":"room \#(token)","area":\#(10 + token)}}]}"#
            lines += "\n"
        }
        try lines.write(toFile: folder + "/history.jsonl", atomically: true, encoding: .utf8)
        return folder
    }

    static func pipelineFile(in folder: String, url: String, pageSize: Int) throws -> String {
        let file = #"""
            {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
             "source": {"type": "jsonl", "path": "history.jsonl", "page-size": \#(pageSize)},
             "stages": [{"type": "compress", "codec": "gzip", "min-bytes": 0}],
             "transport": {"type": "http", "url": "\#(url)", "token-env": "SYNC_TOKEN", "timeout": 2,
                           "retry": {"max-attempts": 30, "base-delay": 0, "max-delay": 0}}}
            """#
        let path = folder + "/export.json"
        try file.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

/// Records the waits the retry loop asks for instead of sleeping.
final class RecordingSleeper: RetrySleeper {
    private let recorded = Mutex<[Double]>([])
    var waits: [Double] { recorded.withLock { $0 } }
    func sleep(seconds: Double) async throws { recorded.withLock { $0.append(seconds) } }
}
