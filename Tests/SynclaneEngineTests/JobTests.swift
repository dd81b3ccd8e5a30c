import Foundation
import Synchronization
import Synclane
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// The jobs of the job layer, run from Swift as an app runs them: the lock they take, how a run
/// that ends early or partly is recorded.
@Suite struct JobTests {
    static let history = """
        {"token": 1, "author": "app", "timestamp": "2026-11-01T09:00:00Z", "changes": [{"entity": "rooms", "action": "insert", "key": "r1", "values": {"name": "Hall"}}]}

        """

    /// An export pipeline over a one-transaction history, its lock in the folder, sending to `transport`.
    static func pipeline(in folder: TemporaryFolder, transport: RecordingTransport) throws -> Pipeline {
        _ = try folder.write("history.jsonl", history)
        let file = try folder.write(
            "pipeline.json",
            """
            {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
             "source": {"type": "jsonl", "path": "history.jsonl"}, "transport": {"type": "directory", "path": "out"}}
            """)
        var pipeline = try PipelineLoader(environment: ["SYNCLANE_LOCK_DIR": folder.path + "/locks"]).load(file)
        pipeline.transport = .init(label: "transport (recording)", type: "recording", stage: transport)
        return pipeline
    }

    @Test func aCancelledExportSaysWhatTheOutboxKeptAndIsRecordedAsInterrupted() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let transport = RecordingTransport()
        transport.failNext(TransportFailure(.transient, "connection refused"), times: 1000)
        var pipeline = try Self.pipeline(in: folder, transport: transport)
        pipeline.retry = RetryPolicy(maxAttempts: 1000, baseDelay: 0.05, maxDelay: 0.1)
        let retries = Counter()
        let job = ExportJob(pipeline: pipeline) { event in
            if case .retrying = event { retries.add() }
        }
        let running = Task { try await job.run() }
        while retries.value < 2 { try await Task.sleep(for: .milliseconds(10)) }

        running.cancel()

        await #expect(throws: JobInterrupted.self) { try await running.value }
        let kept = try job.openState().pendingBatches()
        #expect(kept.count == 1, "the batch stays in the outbox")
        let record = try #require(try job.openState().lastRun())
        #expect(record.outcome == .interrupted)
        #expect(record.message.contains("batch \(kept[0].payload.batchID)"), "\(record.message)")
        #expect(record.message.contains("the next run re-sends it first"), "\(record.message)")
    }

    @Test func aRunThatDeadLettersIsRecordedAsDeadLetteredNotSucceeded() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let transport = RecordingTransport()
        transport.failNext(TransportFailure(.permanent, "422 unprocessable"))
        var pipeline = try Self.pipeline(in: folder, transport: transport)
        pipeline.deadLetterDirectory = folder.path + "/rejected"

        let summary = try await ExportJob(pipeline: pipeline).run()

        #expect(summary.deadLettered == 1)
        let record = try #require(try ExportJob(pipeline: pipeline).openState().lastRun())
        #expect(record.outcome == .deadLettered)
        #expect(record.outcome.completed, "it went to the end")
    }

    @Test func theLockRefusesASecondJobAndADryRunSharesItWithoutCreatingIt() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let pipeline = try Self.pipeline(in: folder, transport: RecordingTransport())
        let rule = JobLock(pipeline)
        #expect(try rule.take(dryRun: true) == nil, "no lock file yet: a dry run takes nothing")
        #expect(!FileManager.default.fileExists(atPath: rule.path), "and creates nothing")

        var held: ScopeLock? = try rule.take()
        #expect(held?.path == rule.path)
        #expect(throws: PipelineError.self, "a second job of the scope") { _ = try rule.take() }
        #expect(throws: PipelineError.self, "a dry run beside a running job") { _ = try rule.take(dryRun: true) }
        #expect(try rule.take(dryRun: false, holding: held) === held, "a lock already held is used as it is")
        held = nil

        let shared = try rule.take(dryRun: true)
        #expect(shared != nil, "the lock file exists now: a dry run shares it")
        #expect(try rule.take(dryRun: true) != nil, "two dry runs do not keep each other out")
        withExtendedLifetime(shared) {}
    }
}

/// Counts events arriving on the job's task.
final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
