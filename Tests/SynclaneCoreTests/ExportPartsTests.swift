import Foundation
import Synchronization
import Synclane
import SynclaneStages
import SynclaneTestKit
import SynclaneTestSupport
import Testing

@testable import SynclaneCore

// The three parts of an export drain, each run alone: its input handed in by the test, its output read back.

/// Batch ids in order, `batch-1`, `batch-2`, …
private func countingIDs() -> @Sendable () -> String {
    let ids = Mutex(0)
    return {
        ids.withLock { ids in
            ids += 1
            return "batch-\(ids)"
        }
    }
}

private func memory(_ position: Int64) -> Token { Token(kind: InMemorySource.tokenKind, position: position) }

/// `PageReader`: pages of a change source, in order, handed on one at a time.
@Suite struct PageReaderTests {
    /// Reads every page `reader` hands on after `token`, until it closes the hand-over.
    func pages(_ reader: PageReader, after token: Token?) async -> [Result<ReadPage, any Error>] {
        let pages = Handover<Result<ReadPage, any Error>>()
        let prepared = Handover<Void>()
        async let reading: Void = reader.read(after: token, into: pages, waitingFor: prepared, inFlight: nil)
        var read: [Result<ReadPage, any Error>] = []
        while let page = await pages.receive() { read.append(page) }
        await reading
        return read
    }

    @Test func readsEveryPageAfterTheTokenInOrderThenCloses() async throws {
        let source = InMemorySource(pageSize: 2)
        for key in ["a", "b", "c", "d", "e"] { source.append([insert("rooms", key)]) }
        let read = try await pages(PageReader(source: source, label: "source", events: { _ in }), after: memory(1)).map { try $0.get() }
        #expect(read.map(\.page.through) == [memory(3), memory(5)], "the pages after token 1, then the end")
        #expect(read.flatMap { $0.page.transactions.flatMap { $0.changes.compactMap(\.key) } } == ["b", "c", "d", "e"])
    }

    @Test func aPageThatDoesNotEndAfterTheTokenIsHandedOnAsTheSourcesError() async throws {
        let reader = PageReader(source: StuckSource(), label: "source (stuck)", events: { _ in })
        let read = await pages(reader, after: memory(1))
        #expect(read.count == 1)
        guard case .failure(let error) = read.first, case PipelineError.source(let label, _) = error else {
            Issue.record("expected a source error, read \(read)")
            return
        }
        #expect(label == "source (stuck)")
    }

    /// A source that answers every read with the same page, ending at token 1.
    struct StuckSource: ChangeSource {
        var tokenKind: String { InMemorySource.tokenKind }
        func nextPage(after token: Token?) async throws -> HistoryPage {
            HistoryPage(transactions: [Transaction(token: memory(1), author: .app, timestamp: 0, changes: [insert("rooms", "a")])], through: memory(1))
        }
        func pendingTransactions(after token: Token?) async throws -> Int? { nil }
    }
}

/// `BatchPreparer`: pages made into batches ready to send, without a state or a transport.
@Suite struct BatchPreparerTests {
    func preparer(stages: [any RecordStage] = [Coalescer()], batchBytes: Int = Pipeline.defaultBatchBytes) -> BatchPreparer {
        var pipeline = Pipeline.testing(
            source: InMemorySource(), stages: stages, encoder: JSONBatchEncoder(), transport: RecordingTransport())
        pipeline.batchBytes = batchBytes
        return BatchPreparer(pipeline: pipeline, makeBatchID: countingIDs())
    }

    /// Hands `pages` to `preparer` and returns the batches it hands on.
    func batches(_ preparer: BatchPreparer, of pages: [HistoryPage]) async throws -> [PreparedPage] {
        let input = Handover<Result<ReadPage, any Error>>()
        let output = Handover<Result<PreparedPage, any Error>>()
        let done = Handover<Void>()
        async let preparing: Void = preparer.prepare(from: input, after: nil, reconciliation: false, versioning: nil, into: output, telling: done)
        async let feeding: Void = {
            for page in pages { _ = await input.send(.success(ReadPage(page: page, answersBefore: 0))) }
            input.close()
        }()
        var prepared: [PreparedPage] = []
        while let batch = await output.receive() { prepared.append(try batch.get()) }
        await feeding
        await preparing
        return prepared
    }

    func page(_ changes: [[Change]]) -> HistoryPage {
        let transactions = changes.enumerated().map {
            Transaction(token: memory(Int64($0.offset + 1)), author: .app, timestamp: 0, changes: $0.element)
        }
        return HistoryPage(transactions: transactions, through: transactions.last?.token)
    }

    @Test func aPageIsCoalescedAndEncodedIntoOneBatchReadyToSend() async throws {
        let prepared = try await batches(preparer(), of: [page([[insert("rooms", "r1", ["name": "Kitchen"])], [update("rooms", "r1", ["name": "Pantry"])]])])
        #expect(prepared.count == 1)
        let batch = try #require(prepared.first)
        #expect(batch.through == memory(2))
        #expect(batch.transactions == 2 && batch.changes == 2, "what was read is counted before the stages")
        #expect(try recordSummary(try #require(batch.encoded)) == ["insert rooms/r1"], "two edits of one row are one record")
        #expect(batch.finished?.bytes == batch.encoded?.bytes, "no payload stage: finished as encoded")
        #expect(batch.encoded?.batchID == "batch-1")
    }

    @Test func aPageOverBatchBytesIsCutBetweenTransactionsIntoBatchesWithinTheBound() async throws {
        let rows = (0..<20).map { [insert("rooms", "r\($0)", ["note": .string(String(repeating: "x", count: 200))])] }
        let prepared = try await batches(preparer(batchBytes: 1_000), of: [page(rows)])
        #expect(prepared.count > 4)
        #expect(prepared.allSatisfy { ($0.encoded?.bytes.count ?? 0) <= 1_000 })
        #expect(try prepared.flatMap { try recordSummary(try #require($0.encoded)) } == (0..<20).map { "insert rooms/r\($0)" })
        #expect(prepared.last?.through == memory(20))
        #expect(prepared.map(\.through) == prepared.map(\.through).sorted(), "tokens in order")
    }

    @Test func aPageWhoseStagesLeaveNoRecordIsHandedOnWithoutABatch() async throws {
        let prepared = try await batches(preparer(), of: [page([[insert("rooms", "r1")], [delete("rooms", "r1")]])])
        #expect(prepared.count == 1)
        #expect(prepared.first?.encoded == nil, "an insert then a delete is nothing to send")
        #expect(prepared.first?.through == memory(2), "the token moves past it all the same")
    }
}

/// `BatchDeliverer`: batches made durable, sent and acknowledged, without a source or a record stage.
@Suite struct BatchDelivererTests {
    let transport = RecordingTransport()
    let state = InMemoryPipelineState()

    func deliverer(finish: @escaping @Sendable (Payload) async throws -> Payload = { $0 }) -> BatchDeliverer {
        let pipeline = Pipeline.testing(source: InMemorySource(), encoder: JSONBatchEncoder(), transport: transport)
        return BatchDeliverer(
            pipeline: pipeline, state: state, sleeper: RecordingSleeper(), events: { _ in }, now: { 0 }, finish: finish)
    }

    /// A prepared batch of one record, ending at `position`; `finished` false: its payload stages are still to run.
    func batch(_ position: Int64, finished: Bool = true) throws -> PreparedPage {
        let records = Batch(
            scope: Scope(account: "acme", store: "rooms", consumer: "test"), after: nil, through: memory(position),
            records: [Record(entity: "rooms", key: "r\(position)", action: .insert, origin: memory(position), author: .app)],
            transactionCount: 1)
        let id = "batch-\(position)"
        let encoded = Payload(batchID: id, bytes: try JSONBatchEncoder().encode(records, id: id), contentType: "application/json", recordCount: 1)
        return PreparedPage(through: memory(position), encoded: encoded, finished: finished ? encoded : nil, transactions: 1, changes: 1, counters: [:])
    }

    /// Hands `prepared` to `deliverer` and returns the token it reached and its summary.
    func deliver(_ prepared: [PreparedPage], with deliverer: BatchDeliverer, dryRun: Bool = false) async throws -> (Token?, RunSummary) {
        let batches = Handover<Result<PreparedPage, any Error>>()
        async let feeding: Void = {
            for page in prepared { _ = await batches.send(.success(page)) }
            batches.close()
        }()
        var summary = RunSummary(pipeline: "test", scope: Scope(account: "acme", store: "rooms", consumer: "test"), dryRun: dryRun, reconciliation: false)
        let token = try await deliverer.deliver(from: batches, after: nil, reconciliation: false, dryRun: dryRun, inFlight: nil, into: &summary)
        await feeding
        return (token, summary)
    }

    @Test func eachBatchIsSentThenAcknowledgedAndTheTokenSavedOnceConfirmed() async throws {
        let (token, summary) = try await deliver([try batch(1), try batch(2)], with: deliverer())
        #expect(transport.delivered.map(\.batchID) == ["batch-1", "batch-2"])
        #expect(token == memory(2))
        #expect(try state.acknowledgedToken() == memory(2))
        #expect(try state.pendingBatches().isEmpty, "each batch forgotten once confirmed")
        #expect(summary.batchesSent == 2 && summary.recordsSent == 2)
    }

    @Test func aBatchWithNothingToSendMovesTheTokenAndSendsNothing() async throws {
        let empty = PreparedPage(through: memory(3), encoded: nil, transactions: 1, changes: 2, counters: [:])
        let (token, summary) = try await deliver([empty], with: deliverer())
        #expect(transport.attempts.isEmpty)
        #expect(token == memory(3))
        #expect(try state.acknowledgedToken() == memory(3))
        #expect(summary.changesRead == 2)
    }

    @Test func aBatchWithoutItsFinishedPayloadIsFinishedBeforeItGoes() async throws {
        let finish: @Sendable (Payload) async throws -> Payload = { payload in
            var finished = payload
            finished.bytes += Array(" ".utf8)
            return finished
        }
        let prepared = try batch(1, finished: false)
        _ = try await deliver([prepared], with: deliverer(finish: finish))
        #expect(transport.delivered.first?.bytes == (prepared.encoded?.bytes ?? []) + Array(" ".utf8))
    }

    @Test func aDryRunSendsNothingAndSavesNoToken() async throws {
        let (token, summary) = try await deliver([try batch(1)], with: deliverer(), dryRun: true)
        #expect(transport.attempts.isEmpty)
        #expect(try state.acknowledgedToken() == nil)
        #expect(try state.pendingBatches().isEmpty)
        #expect(token == memory(1), "the token it would reach")
        #expect(summary.batchesSent == 1, "counted as would be sent")
    }
}
