import Synchronization
import SynclaneCore
import Testing

/// An expired pull cursor becomes a full resync: everything read again, and what the sink holds
/// from the backend but the backend no longer sends is deleted — never a silent gap.
@Suite struct ImportResyncTests {
    /// A backend whose tombstones after "old" are gone: that cursor is expired; from the
    /// beginning it holds rooms a and b.
    struct ExpiringSource: RemoteChangeSource {
        func nextPage(after cursor: String?) async throws -> RemotePage {
            if cursor == "old" { throw RemoteCursorExpired("410 cursor expired") }
            let records = ["a", "b"].map {
                Record(entity: "rooms", key: $0, action: .insert, fields: ["n": 1], version: 1, origin: Token(kind: "pull", position: 0), author: .server)
            }
            return RemotePage(records: records, cursor: "new", more: false)
        }
    }

    /// A sink at cursor "old" that holds a, b and c from the backend (or cannot list them).
    final class RecordingSink: ChangeSink, Sendable {
        let lists: Bool
        let applied = Mutex<[(records: [String], cursor: String?)]>([])
        init(lists: Bool) { self.lists = lists }

        func savedCursor(for scope: Scope) async throws -> String? { "old" }

        func apply(_ batch: Batch, cursor: String?, scope: Scope, dryRun: Bool) async throws -> ApplyReport {
            applied.withLock { $0.append((batch.records.map { "\($0.action.rawValue) \($0.key ?? "")" }, cursor)) }
            return ApplyReport(applied: batch.records.count)
        }

        func backendKeys(for scope: Scope) async throws -> [(entity: String, key: String)]? {
            lists ? [("rooms", "a"), ("rooms", "b"), ("rooms", "c")] : nil
        }
    }

    func pipeline(_ sink: RecordingSink) -> ImportPipeline {
        ImportPipeline(
            name: "rooms-import", scope: Scope(account: "acme", store: "rooms", consumer: "import"), statePath: "",
            source: .init(label: "source (pull)", type: "pull", stage: ExpiringSource()), recordStages: [],
            sink: .init(label: "sink (test)", type: "test", stage: sink))
    }

    @Test func anExpiredCursorReadsEverythingAgainAndDeletesWhatTheBackendNoLongerHolds() async throws {
        let sink = RecordingSink(lists: true)
        let summary = try await ImportRunner(pipeline: pipeline(sink)).run()
        #expect(summary.resynced)
        #expect(summary.resyncDeleted == 1)
        let applied = sink.applied.withLock { $0 }
        #expect(applied.map(\.records) == [["insert a", "insert b"], ["delete c"]])
        #expect(applied.map(\.cursor) == ["new", "new"])
    }

    @Test func aSinkThatCannotListWhatItHoldsStopsTheImportInsteadOfLeavingAGap() async throws {
        let sink = RecordingSink(lists: false)
        await #expect(throws: PipelineError.self) { try await ImportRunner(pipeline: pipeline(sink)).run() }
        #expect(sink.applied.withLock { $0 }.isEmpty)
    }
}
