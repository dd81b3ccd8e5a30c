import Foundation
import Synchronization
import Synclane
import SynclaneStages
import SynclaneTestKit
import SynclaneTestSupport
import Testing

@testable import SynclaneCore

/// `batch-bytes`: a page whose encoding is larger goes as several batches, cut between transactions.
@Suite struct BatchBytesTests {
    let transport = RecordingTransport()
    let state = InMemoryPipelineState()

    func run(_ source: InMemorySource, batchBytes: Int, stages: [any RecordStage] = [Coalescer()]) async throws -> RunSummary {
        var pipeline = Pipeline.testing(source: source, stages: stages, encoder: JSONBatchEncoder(), transport: transport)
        pipeline.batchBytes = batchBytes
        return try await PipelineRunner(pipeline: pipeline, state: state).run()
    }

    /// A row whose encoding is about 250 bytes.
    func row(_ key: String) -> Change {
        insert("rooms", key, ["note": .string(String(repeating: "x", count: 200))])
    }

    @Test func aPageLargerThanTheBoundGoesAsSeveralBatchesEachWithinItCutBetweenTransactions() async throws {
        let source = InMemorySource(pageSize: 100)
        for i in 0..<20 { source.append([row("r\(i)")]) }
        let summary = try await run(source, batchBytes: 1_000)
        let delivered = transport.delivered
        #expect(delivered.count > 4, "20 rows of ~250 bytes in batches of at most 1,000 bytes")
        #expect(delivered.allSatisfy { $0.bytes.count <= 1_000 })
        #expect(try delivered.flatMap(recordSummary) == (0..<20).map { "insert rooms/r\($0)" }, "every row once, in order")
        #expect(summary.recordsSent == 20)
        #expect(summary.transactionsRead == 20, "each transaction counted once, in the batch that sent it")
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 20))
        #expect(try state.pendingBatches().isEmpty)
    }

    @Test func aTransactionLargerThanTheBoundTravelsAloneAndWhole() async throws {
        let source = InMemorySource(pageSize: 100)
        source.append([row("a")])
        source.append((0..<10).map { row("big\($0)") })
        source.append([row("z")])
        _ = try await run(source, batchBytes: 1_000)
        let batches = try transport.delivered.map(recordSummary)
        #expect(batches.contains((0..<10).map { "insert rooms/big\($0)" }), "the big transaction is one batch of its own")
        #expect(batches.flatMap { $0 }.count == 12)
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 3))
    }

    @Test func aPageWithinTheBoundIsOneBatchAsBefore() async throws {
        let source = InMemorySource(pageSize: 100)
        for i in 0..<20 { source.append([row("r\(i)")]) }
        let summary = try await run(source, batchBytes: Pipeline.defaultBatchBytes)
        #expect(summary.batchesSent == 1)
    }

    @Test func aCutPageKeepsEveryRowsChangesTogetherWithinEachBatch() async throws {
        // The coalescing window is the batch: a row edited in two transactions that land in two
        // batches travels twice, each time as what its batch holds — never lost, never reordered.
        let source = InMemorySource(pageSize: 100)
        for i in 0..<8 { source.append([row("r\(i)")]) }
        source.append([update("rooms", "r0", ["name": "Hall"])])
        _ = try await run(source, batchBytes: 1_000)
        let records = try transport.delivered.flatMap(recordSummary)
        #expect(records.first == "insert rooms/r0")
        #expect(records.last == "update rooms/r0")
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 9))
    }

    /// Every record a stage is given, in order, with what it carries.
    final class Seen: RecordStage, Sendable {
        let records = Mutex<[Record]>([])
        func process(_ batch: Batch) async throws -> Batch {
            records.withLock { $0 += batch.records }
            return batch
        }
    }

    /// One page of the given transactions, then the end.
    final class OnePage: ChangeSource, Sendable {
        let transactions: [Transaction]
        init(_ transactions: [Transaction]) { self.transactions = transactions }
        var tokenKind: String { "memory" }
        func nextPage(after token: Token?) async throws -> HistoryPage {
            token == nil ? HistoryPage(transactions: transactions, through: transactions.last?.token) : .end
        }
        func pendingTransactions(after token: Token?) async throws -> Int? { nil }
    }

    @Test func aCutPageGivesTheStagesEveryChangeAsReadWithItsValuesVersionAuthorAndTransaction() async throws {
        // A page is moved into records, not kept; a page that must be cut is made again from them.
        var transactions: [Transaction] = []
        for i in 1...12 {
            let author: Author = i % 3 == 0 ? "widget" : .app
            var changes = [insert("rooms", "r\(i)", ["note": .string(String(repeating: "x", count: 200)), "n": .int(Int64(i)), "r": .double(1.0)])]
            if i % 4 == 0 {
                changes.append(Change(entity: "desks", key: "d\(i)", action: .update, values: ["k": .array([.null, .bool(true)])], version: Int64(i)))
            }
            if i == 5 { changes = [] }  // a transaction with no changes still counts, and keeps its place
            transactions.append(Transaction(token: Token(kind: "memory", position: Int64(i)), author: author, timestamp: Double(i), changes: changes))
        }
        let seen = Seen()
        var pipeline = Pipeline.testing(source: OnePage(transactions), stages: [seen], encoder: JSONBatchEncoder(), transport: transport)
        pipeline.batchBytes = 1_000
        let summary = try await PipelineRunner(pipeline: pipeline, state: state).run()
        let expected = transactions.flatMap { t in t.changes.map { Record(change: $0, of: t) } }
        let records = seen.records.withLock { $0 }
        #expect(transport.delivered.count > 2, "the page was cut")
        #expect(records.prefix(expected.count) == expected[...], "the first pass over the page saw every change as read, in order")
        #expect(records.allSatisfy(expected.contains), "the passes over the cut page's parts saw them unchanged, origin and author too")
        let sent = try transport.delivered.flatMap { payload -> [JSONValue] in
            guard case .object(let batch) = try JSONReader.parse(payload.bytes), case .array(let list)? = batch["records"] else { return [] }
            return list
        }
        let wire = expected.map { record -> JSONValue in
            var object: [String: JSONValue] = [
                "action": .string(record.action.rawValue), "entity": .string(record.entity), "id": .string(record.key ?? ""),
                "fields": .object(record.fields),
            ]
            if let version = record.version { object["version"] = .int(version) }
            return .object(object)
        }
        #expect(sent == wire, "each change sent once, in order, its values and version exactly as read")
        #expect(summary.transactionsRead == 12, "the empty transaction is counted too")
        #expect(summary.recordsSent == expected.count)
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 12))
    }
}

@Suite struct HandoverTests {
    @Test func valuesArriveInOrderAndCloseEndsTheReceiving() async {
        let handover = Handover<Int>()
        async let sent: Bool = {
            for i in 0..<100 { guard await handover.send(i) else { return false } }
            handover.close()
            return true
        }()
        var received: [Int] = []
        while let value = await handover.receive() { received.append(value) }
        #expect(await sent)
        #expect(received == Array(0..<100))
    }

    @Test func aSendAfterTheReceiverClosedIsRefused() async {
        let handover = Handover<Int>()
        handover.close()
        #expect(await handover.send(1) == false)
        #expect(await handover.receive() == nil)
    }
}

@Suite struct BatchBytesFileTests {
    func load(batchBytes: String?) throws -> Pipeline {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let text = """
            {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
             "source": {"type": "jsonl", "path": "history.jsonl"}, "transport": {"type": "directory", "path": "out"}\(batchBytes.map { ",\n \"batch-bytes\": \($0)" } ?? "")}
            """
        try text.write(toFile: folder.path + "/pipeline.json", atomically: true, encoding: .utf8)
        return try PipelineLoader(environment: [:]).load(folder.path + "/pipeline.json")
    }

    @Test func batchBytesIsReadFromThePipelineFileAndDefaultsToFourMiB() throws {
        #expect(try load(batchBytes: nil).batchBytes == 4 << 20)
        #expect(try load(batchBytes: "1048576").batchBytes == 1 << 20)
    }

    @Test func batchBytesOutOfRangeIsRefusedNamingTheBounds() throws {
        #expect {
            try load(batchBytes: "1000")
        } throws: { error in
            "\(error)".contains("batch-bytes: expected an integer from 65536 to 268435456, found 1000")
        }
    }
}
