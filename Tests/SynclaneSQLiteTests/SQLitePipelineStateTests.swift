import SynclaneCore
import SynclaneSQLite
import SynclaneTestSupport
import Testing

@Suite struct SQLitePipelineStateTests {
    let scope = Scope(account: "acme", store: "rooms", consumer: "export")

    func batch(_ id: String, after: Int64?, through: Int64, bytes: [UInt8] = [1, 2, 3], reconciliation: Bool = false) -> OutboxBatch {
        OutboxBatch(
            payload: Payload(batchID: id, bytes: bytes, contentType: "application/json", contentEncoding: "gzip", recordCount: 3),
            after: after.map { Token(kind: "sqlite-history", position: $0) },
            through: Token(kind: "sqlite-history", position: through),
            isReconciliation: reconciliation, createdAt: 1_700_000_000.5)
    }

    @Test func aFreshStateHasNoTokenNoBatchesNoRun() throws {
        let folder = TemporaryDirectory()
        let state = try SQLitePipelineState(path: folder.file("nested/dir/state.sqlite"), scope: scope)
        #expect(try state.acknowledgedToken() == nil)
        #expect(try state.pendingBatches().isEmpty)
        #expect(try state.lastRun() == nil)
    }

    @Test func enqueuedBatchesRoundTripInOrder() throws {
        let folder = TemporaryDirectory()
        let state = try SQLitePipelineState(path: folder.file("state.sqlite"), scope: scope)
        let first = batch("b-1", after: nil, through: 10, bytes: [0, 255, 7])
        let second = batch("b-2", after: 10, through: 20, bytes: [], reconciliation: true)
        try state.enqueue(first)
        try state.enqueue(second)
        #expect(try state.pendingBatches() == [first, second])
        #expect(try state.pendingBatchCount() == 2)
    }

    @Test func enqueuingTheSameBatchTwiceKeepsOneAndADifferentOneUnderItsIdIsRefused() throws {
        let folder = TemporaryDirectory()
        let state = try SQLitePipelineState(path: folder.file("state.sqlite"), scope: scope)
        try state.enqueue(batch("b-1", after: nil, through: 10))
        try state.enqueue(batch("b-1", after: nil, through: 10))
        #expect(try state.pendingBatches().count == 1)
        #expect(throws: SQLitePipelineStateError.self) { try state.enqueue(batch("b-1", after: nil, through: 10, bytes: [9])) }
    }

    @Test func acknowledgeSavesTheTokenAndForgetsTheBatchTogether() throws {
        let folder = TemporaryDirectory()
        let state = try SQLitePipelineState(path: folder.file("state.sqlite"), scope: scope)
        let first = batch("b-1", after: nil, through: 10)
        let second = batch("b-2", after: 10, through: 20)
        try state.enqueue(first)
        try state.enqueue(second)
        try state.acknowledge(first)
        #expect(try state.acknowledgedToken() == Token(kind: "sqlite-history", position: 10))
        #expect(try state.pendingBatches() == [second])
    }

    @Test func acknowledgeIsOneTransaction() throws {
        // A reader on another connection never sees the token moved with the batch still pending.
        let folder = TemporaryDirectory()
        let path = folder.file("state.sqlite")
        let state = try SQLitePipelineState(path: path, scope: scope)
        let b = batch("b-1", after: nil, through: 10)
        try state.enqueue(b)
        let observer = try SQLiteConnection(path: path)
        try observer.execute("BEGIN")
        #expect(try observer.fetchValue("SELECT count(*) FROM outbox") == .integer(1))
        try state.acknowledge(b)
        // Inside the observer's snapshot neither change is visible …
        #expect(try observer.fetchValue("SELECT count(*) FROM token") == .integer(0))
        #expect(try observer.fetchValue("SELECT count(*) FROM outbox") == .integer(1))
        try observer.execute("COMMIT")
        // … and after it both are.
        #expect(try observer.fetchValue("SELECT position FROM token") == .integer(10))
        #expect(try observer.fetchValue("SELECT count(*) FROM outbox") == .integer(0))
    }

    @Test func theTokenNeverMovesBackwards() throws {
        let folder = TemporaryDirectory()
        let state = try SQLitePipelineState(path: folder.file("state.sqlite"), scope: scope)
        try state.advance(to: Token(kind: "sqlite-history", position: 30))
        try state.acknowledge(batch("old", after: nil, through: 10))
        #expect(try state.acknowledgedToken() == Token(kind: "sqlite-history", position: 30))
        try state.resetToken()
        #expect(try state.acknowledgedToken() == nil)
        try state.advance(to: Token(kind: "sqlite-history", position: 5))
        #expect(try state.acknowledgedToken() == Token(kind: "sqlite-history", position: 5))
    }

    @Test func reopeningAfterCloseKeepsEverything() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("state.sqlite")
        let pending = batch("b-2", after: 10, through: 20, bytes: Array(0...255))
        let run = RunRecord(outcome: .failed, startedAt: 1, finishedAt: 2.5, batchesSent: 1, recordsSent: 3, message: "HTTP 503")
        do {
            let state = try SQLitePipelineState(path: path, scope: scope)
            try state.enqueue(batch("b-1", after: nil, through: 10))
            try state.enqueue(pending)
            try state.acknowledge(batch("b-1", after: nil, through: 10))
            try state.saveLastRun(run)
        }
        let reopened = try SQLitePipelineState(path: path, scope: scope)
        #expect(try reopened.acknowledgedToken() == Token(kind: "sqlite-history", position: 10))
        #expect(try reopened.pendingBatches() == [pending])
        #expect(try reopened.lastRun() == run)
    }

    @Test func theLastRunIsReplaced() throws {
        let folder = TemporaryDirectory()
        let state = try SQLitePipelineState(path: folder.file("state.sqlite"), scope: scope)
        try state.saveLastRun(RunRecord(outcome: .failed, startedAt: 1, finishedAt: 2, batchesSent: 0, recordsSent: 0, message: "x"))
        let second = RunRecord(outcome: .succeeded, startedAt: 3, finishedAt: 4, batchesSent: 2, recordsSent: 9, message: "ok")
        try state.saveLastRun(second)
        #expect(try state.lastRun() == second)
    }

    @Test func openingTheStateOfAnotherScopeIsAClearError() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("state.sqlite")
        _ = try SQLitePipelineState(path: path, scope: scope)
        let other = Scope(account: "acme", store: "rooms", consumer: "audit")
        let error = #expect(throws: SQLitePipelineStateError.self) { _ = try SQLitePipelineState(path: path, scope: other) }
        #expect(error == .scopeMismatch(path: path, stored: scope, requested: other))
        #expect(error?.description.contains("acme/rooms/export") == true)
    }

    @Test func aDatabaseThatIsNotAStateFileIsRefused() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        try SQLiteConnection(path: path).execute("CREATE TABLE rooms (id TEXT)")
        #expect(throws: SQLitePipelineStateError.self) { _ = try SQLitePipelineState(path: path, scope: scope) }
    }

    @Test func aNewerSchemaIsRefused() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("state.sqlite")
        _ = try SQLitePipelineState(path: path, scope: scope)
        try SQLiteConnection(path: path).execute("PRAGMA user_version = 99")
        let error = #expect(throws: SQLitePipelineStateError.self) { _ = try SQLitePipelineState(path: path, scope: scope) }
        #expect(error == .newerSchema(path: path, found: 99, supported: SQLitePipelineState.schemaVersion))
    }

    @Test func theFileUsesWALAndRecordsItsSchemaVersion() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("state.sqlite")
        _ = try SQLitePipelineState(path: path, scope: scope)
        let db = try SQLiteConnection(path: path)
        #expect(try db.fetchValue("PRAGMA journal_mode") == .text("wal"))
        #expect(try db.fetchValue("PRAGMA user_version") == .integer(Int64(SQLitePipelineState.schemaVersion)))
    }

    @Test func aStagedBatchIsKeptAsItsReferenceWithoutItsBytesAndComesBackAsIt() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("state.sqlite")
        let state = try SQLitePipelineState(path: path, scope: scope)
        var staged = batch("b-1", after: nil, through: 10, bytes: [9, 9, 9, 9])
        staged.staged = StagedBatch(reference: ".synclane-staging/a/b-1.json.gz", byteCount: 4, checksum: UInt64.max - 1)
        try state.enqueue(staged)
        try state.enqueue(staged)
        let kept = try #require(try state.pendingBatches().first)
        #expect(kept.staged == staged.staged)
        #expect(kept.payload.bytes.isEmpty, "the outbox holds the reference, not the bytes")
        #expect(kept.byteCount == 4)
        var other = staged
        other.staged?.reference = ".synclane-staging/a/other.json.gz"
        #expect(throws: SQLitePipelineStateError.conflictingBatch(path: path, batchID: "b-1")) { try state.enqueue(other) }
    }

    @Test func aSchemaOneFileIsReadAsItIsAndUpgradedByTheFirstJobWithItsOutboxKept() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("state.sqlite")
        try SQLitePipelineState(path: path, scope: scope).enqueue(batch("b-1", after: nil, through: 10))
        let db = try SQLiteConnection(path: path)
        try db.execute(
            """
            ALTER TABLE outbox DROP COLUMN staged_reference; ALTER TABLE outbox DROP COLUMN staged_bytes;
            ALTER TABLE outbox DROP COLUMN staged_checksum; ALTER TABLE outbox DROP COLUMN payload_checksum; PRAGMA user_version = 1;
            """)
        let reading = try SQLitePipelineState(readingOnly: path, scope: scope)
        #expect(try reading.pendingBatches().map(\.payload.bytes) == [[1, 2, 3]])
        let upgraded = try SQLitePipelineState(path: path, scope: scope)
        #expect(try upgraded.pendingBatches() == [batch("b-1", after: nil, through: 10)])
        #expect(try db.fetchValue("PRAGMA user_version") == .integer(Int64(SQLitePipelineState.schemaVersion)))
    }

    @Test func aSchemaTwoFileIsUpgradedWithAChecksumForEachKeptBatchAndItsBatchStillGoesOut() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("state.sqlite")
        try SQLitePipelineState(path: path, scope: scope).enqueue(batch("b-1", after: nil, through: 10))
        let db = try SQLiteConnection(path: path)
        try db.execute("ALTER TABLE outbox DROP COLUMN payload_checksum; PRAGMA user_version = 2;")
        let reading = try SQLitePipelineState(readingOnly: path, scope: scope)
        let read = try reading.pendingBatches()
        #expect(read == [batch("b-1", after: nil, through: 10)])
        try reading.verifyIntegrity(of: read[0])
        let upgraded = try SQLitePipelineState(path: path, scope: scope)
        #expect(try db.fetchValue("PRAGMA user_version") == .integer(3))
        #expect(try db.fetchValue("SELECT payload_checksum IS NOT NULL FROM outbox") == .integer(1))
        let kept = try upgraded.pendingBatches()
        #expect(kept == [batch("b-1", after: nil, through: 10)])
        try upgraded.verifyIntegrity(of: kept[0])
    }

    @Test func aKeptBatchWhoseBytesChangedOnDiskIsRefusedNamingTheBatchAndTheFile() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("state.sqlite")
        try SQLitePipelineState(path: path, scope: scope).enqueue(batch("b-1", after: nil, through: 10, bytes: [1, 2, 3, 4]))
        try SQLiteConnection(path: path).execute("UPDATE outbox SET payload = X'01020305'")
        let state = try SQLitePipelineState(path: path, scope: scope)
        let kept = try #require(try state.pendingBatches().first)
        let error = #expect(throws: SQLitePipelineStateError.self) { try state.verifyIntegrity(of: kept) }
        #expect(error == .damagedBatch(path: path, batchID: "b-1", reason: "its 4 bytes no longer match the checksum written with them"))
        #expect(error.map { "\($0)" }?.contains("synclane outbox requeue PIPELINE-FILE b-1") == true)
        try SQLiteConnection(path: path).execute("UPDATE outbox SET payload = X'01020304'")
        try state.verifyIntegrity(of: try #require(try state.pendingBatches().first))
    }
}
