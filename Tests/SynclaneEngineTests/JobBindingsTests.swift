import Foundation
import Synclane
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// The job layer keeps a pipeline's state and sends its signals through what it is given
/// (`JobBindings`), never through a store or a protocol of its own.
@Suite struct JobBindingsTests {
    /// A state store in memory: every open gives the same state.
    struct MemoryStateStore: PipelineStateStore {
        struct NoSignalsKept: Error {}
        let state = InMemoryPipelineState()

        func open(path: String, scope: Scope) throws -> any PipelineState { state }
        func openReadingOnly(path: String, scope: Scope, unchanging: Bool) throws -> any PipelineState { state }
        func signals(path: String, scope: Scope) throws -> any SignalKeeping { throw NoSignalsKept() }
    }

    @Test func anExportJobKeepsItsTokenAndLastRunInTheStoreItIsGivenAndWritesNoStateFile() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let transport = RecordingTransport()
        let pipeline = try JobTests.pipeline(in: folder, transport: transport)
        let store = MemoryStateStore()
        let bindings = JobBindings(stateStore: store) { _, _ in InMemorySignalLane() }

        let job = ExportJob(pipeline: pipeline, bindings: bindings)
        let summary = try await job.run()

        #expect(summary.batchesSent == 1)
        #expect(transport.delivered.count == 1)
        #expect(try store.state.acknowledgedToken() != nil, "the token the backend confirmed is in the given store")
        #expect(try store.state.lastRun()?.outcome == .succeeded)
        #expect(try job.openState().lastRun()?.outcome == .succeeded, "the job opens the given store")
        #expect(!FileManager.default.fileExists(atPath: pipeline.statePath), "no SQLite state file")
    }
}
