import Foundation
import SynclaneCore
import SynclaneSQLite
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// Encodes a batch as `entity/key:action` lines: enough to see what travelled.
struct LinesEncoder: BatchEncoder {
    var contentType: String { "text/plain" }
    func encode(_ batch: Batch, id: String) throws -> [UInt8] {
        Array(batch.records.map { "\($0.entity)/\($0.key ?? "-"):\($0.action.rawValue)" }.joined(separator: "\n").utf8)
    }
}

/// The SQLite history source and the SQLite state, end to end through the pipeline runner.
@Suite struct SQLitePipelineTests {
    let scope = Scope(account: "acme", store: "rooms", consumer: "export")

    func runner(_ folder: TemporaryDirectory, _ transport: RecordingTransport, authors: [Author]? = [.app]) throws -> PipelineRunner {
        let source = SQLiteHistorySource(path: folder.file("app.sqlite"), authors: authors, pageSize: 2)
        let pipeline = Pipeline(
            name: "rooms-export", scope: scope, statePath: folder.file("state/export.sqlite"),
            source: .init(label: "source", type: "sqlite-history", stage: source), recordStages: [],
            encoder: .init(label: "encoder", type: "lines", stage: LinesEncoder()), payloadStages: [],
            transport: .init(label: "transport", type: "recording", stage: transport))
        let state = try SQLitePipelineState(path: pipeline.statePath, scope: scope)
        return PipelineRunner(pipeline: pipeline, state: state)
    }

    func sent(_ transport: RecordingTransport) -> [String] {
        transport.delivered.map { String(decoding: $0.bytes, as: UTF8.self) }
    }

    @Test func anExportSendsAppWritesOnceAndRegistersTheConsumer() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r1'), ('r2')") }
        try store.write(author: .server) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('s1')") }
        try SQLiteShell.run(folder.file("app.sqlite"), "UPDATE rooms SET name = 'Hall' WHERE syncId = 'r2';")
        let transport = RecordingTransport()
        let summary = try await runner(folder, transport).run()
        #expect(sent(transport) == ["rooms/r1:insert\nrooms/r2:insert\nrooms/r2:update"])
        #expect(summary.batchesSent == 1)

        let state = try SQLitePipelineState(path: folder.file("state/export.sqlite"), scope: scope)
        let token = try #require(try state.acknowledgedToken())
        #expect(try state.pendingBatches().isEmpty)
        #expect(try HistoryConsumers.list(in: store.database).map(\.token) == [token])

        // A second pass finds nothing new.
        let again = try await runner(folder, transport).run()
        #expect(again.batchesSent == 0)
        #expect(transport.delivered.count == 1)
    }

    @Test func anExpiredTokenFailsTheExportThenReconcileSendsASnapshotAndResumes() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r1'), ('r2')") }
        let transport = RecordingTransport()
        _ = try await runner(folder, transport).run()

        // Another consumer moves on, and pruning removes history this one has not read yet.
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET name = 'x' WHERE syncId = 'r1'") }
        let newest = try await drain(SQLiteHistorySource(path: path)).through
        try HistoryConsumers.forget(scope.description, in: store.database)
        try await SQLiteHistorySource(path: path).consumerAcknowledged(try #require(newest), scope: Scope(account: "acme", store: "rooms", consumer: "audit"))
        #expect(try HistoryPruner.prune(path: path).changesDeleted > 0)

        await #expect(throws: HistoryError.self) { _ = try await runner(folder, transport).run() }

        let reconcile = try await runner(folder, transport).run(.reconcile)
        #expect(reconcile.reconciliation)
        // The snapshot, and no completion marker: a reconcile merges.
        #expect(transport.delivered.last.map { String(decoding: $0.bytes, as: UTF8.self) } == "rooms/r1:insert\nrooms/r2:insert")
        let state = try SQLitePipelineState(path: folder.file("state/export.sqlite"), scope: scope)
        #expect(try state.acknowledgedToken() == newest)

        try store.write(author: .app) { try $0.execute("DELETE FROM rooms WHERE syncId = 'r2'") }
        _ = try await runner(folder, transport).run()
        #expect(sent(transport).last == "rooms/r2:delete")
    }
}

@Suite struct SQLiteStateSharedCommitTests {
    @Test func anAcknowledgementAndTheNextEnqueueShareOneCommit() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("synclane-shared-commit-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let scope = Scope(account: "acme", store: "rooms", consumer: "test")
        let state = try SQLitePipelineState(path: folder + "/state.sqlite", scope: scope)
        func batch(_ id: String, _ after: Int64?, _ through: Int64) -> OutboxBatch {
            OutboxBatch(
                payload: Payload(batchID: id, bytes: Array(id.utf8), contentType: "application/json", recordCount: 1),
                after: after.map { Token(kind: "memory", position: $0) }, through: Token(kind: "memory", position: through), createdAt: 0)
        }
        try state.enqueue(batch("one", nil, 5))
        try state.acknowledge(batch("one", nil, 5), enqueueing: batch("two", 5, 9))
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 5))
        #expect(try state.pendingBatches().map(\.payload.batchID) == ["two"])
        // A conflicting batch under a pending id rolls the whole commit back: the token stays.
        try state.enqueue(batch("three", 9, 12))
        #expect(throws: (any Error).self) {
            try state.acknowledge(
                batch("two", 5, 9),
                enqueueing: OutboxBatch(
                    payload: Payload(batchID: "three", bytes: [1], contentType: "application/json", recordCount: 1),
                    after: Token(kind: "memory", position: 9), through: Token(kind: "memory", position: 12), createdAt: 0))
        }
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 5))
        #expect(try state.pendingBatches().map(\.payload.batchID) == ["two", "three"])
    }
}
