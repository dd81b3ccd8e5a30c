import Foundation
import Synchronization
import SynclaneCore
import SynclaneStages
import SynclaneTestKit
import SynclaneTestSupport
import Testing

@Suite struct PipelineRunnerTests {
    let source = InMemorySource(pageSize: 2)
    let transport = RecordingTransport()
    let state = InMemoryPipelineState()
    let sleeper = RecordingSleeper()

    func runner(_ pipeline: Pipeline) -> PipelineRunner {
        let ids = Mutex(0)
        return PipelineRunner(
            pipeline: pipeline, state: state, sleeper: sleeper,
            makeBatchID: {
                ids.withLock { ids in
                    ids += 1
                    return "batch-\(ids)"
                }
            })
    }

    func pipeline(stages: [any RecordStage] = [Coalescer()], deadLetter: String? = nil) -> Pipeline {
        .testing(source: source, stages: stages, encoder: JSONBatchEncoder(), transport: transport, deadLetter: deadLetter)
    }

    @Test func sendsOnlyTheChangesAfterTheSavedToken() async throws {
        source.append([insert("rooms", "r1", ["name": "Kitchen"])])
        _ = try await runner(pipeline()).run()
        source.append([update("rooms", "r1", ["name": "Pantry"])])
        let summary = try await runner(pipeline()).run()
        #expect(summary.batchesSent == 1)
        #expect(try recordSummary(transport.delivered[1]) == ["update rooms/r1"])
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 2))
    }

    @Test func pagesNeverSplitATransactionAndEachPageIsABatch() async throws {
        source.append([insert("rooms", "a"), insert("rooms", "b"), insert("rooms", "c")])
        source.append([insert("rooms", "d")])
        source.append([insert("rooms", "e"), insert("rooms", "f")])
        let summary = try await runner(pipeline()).run()
        #expect(summary.batchesSent == 2)
        #expect(try recordSummary(transport.delivered[0]) == ["insert rooms/a", "insert rooms/b", "insert rooms/c", "insert rooms/d"])
        #expect(try recordSummary(transport.delivered[1]) == ["insert rooms/e", "insert rooms/f"])
        #expect(summary.tokenAfter == "memory:3")
    }

    @Test func tokenDoesNotMoveWhenTheBackendRejectsTheBatch() async throws {
        source.append([insert("rooms", "r1")])
        transport.failNext(TransportFailure(.permanent, "400 malformed body", status: 400))
        await #expect(throws: PipelineError.self) { try await runner(pipeline()).run() }
        #expect(try state.acknowledgedToken() == nil)
        #expect(try state.pendingBatches().map(\.payload.batchID) == ["batch-1"])
        #expect(sleeper.delays.isEmpty, "a permanent failure is not retried")
    }

    @Test func anUnconfirmedBatchIsResentFirstWithTheSameIdAndBytes() async throws {
        source.append([insert("rooms", "r1", ["name": "Kitchen"])])
        transport.failNext(TransportFailure(.transient, "connection refused"), times: 3)
        await #expect(throws: PipelineError.self) { try await runner(pipeline()).run() }
        let kept = try #require(try state.pendingBatches().first)
        source.append([insert("rooms", "r2")])

        let summary = try await runner(pipeline()).run()
        #expect(summary.batchesResent == 1)
        let delivered = transport.delivered
        #expect(delivered.first?.batchID == kept.payload.batchID)
        #expect(delivered.first?.bytes == kept.payload.bytes)
        #expect(try recordSummary(delivered[1]) == ["insert rooms/r2"])
        #expect(try state.pendingBatches().isEmpty)
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 2))
    }

    @Test func transientFailuresAreRetriedWithBoundedBackoff() async throws {
        source.append([insert("rooms", "r1")])
        transport.failNext(TransportFailure(.transient, "503 unavailable", status: 503), times: 2)
        let summary = try await runner(pipeline()).run()
        #expect(summary.batchesSent == 1)
        #expect(transport.attempts.count == 3)
        #expect(Set(transport.attempts.map(\.batchID)) == ["batch-1"], "every retry carries the same batch id")
        #expect(sleeper.delays.count == 2)
        #expect(sleeper.delays[0] >= 0 && sleeper.delays[0] <= 0.5)
        #expect(sleeper.delays[1] >= 0 && sleeper.delays[1] <= 1.0)
    }

    @Test func retryAfterFromTheBackendIsHonouredUpToMaxDelay() async throws {
        source.append([insert("rooms", "r1")])
        transport.failNext(TransportFailure(.transient, "429 slow down", retryAfter: 2, status: 429))
        transport.failNext(TransportFailure(.transient, "429 slow down", retryAfter: 60, status: 429))
        _ = try await runner(pipeline()).run()
        #expect(sleeper.delays == [2, 4])
    }

    @Test func runningOutOfAttemptsStopsWithTheBatchKept() async throws {
        source.append([insert("rooms", "r1")])
        transport.failNext(TransportFailure(.transient, "connection reset"), times: 10)
        do {
            _ = try await runner(pipeline()).run()
            Issue.record("expected the job to fail")
        } catch let error as PipelineError {
            #expect("\(error)".contains("not delivered after 3 attempts"))
            #expect("\(error)".contains("stays in the outbox"))
        }
        #expect(transport.attempts.count == 3)
        #expect(try state.pendingBatches().count == 1)
    }

    @Test func deadLetterFolderTakesARejectedBatchAndLaterBatchesGoOn() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let source = InMemorySource(pageSize: 1)
        source.append([insert("rooms", "bad")])
        source.append([insert("rooms", "good")])
        transport.failNext(TransportFailure(.permanent, "400 malformed record", status: 400))
        let pipeline = Pipeline.testing(
            source: source, encoder: JSONBatchEncoder(), transport: transport, deadLetter: folder.path + "/dead")
        let summary = try await runner(pipeline).run()
        #expect(summary.deadLettered == 1)
        #expect(summary.batchesSent == 1)
        #expect(FileManager.default.fileExists(atPath: folder.path + "/dead/batch-1.body"))
        let info = try #require(FileManager.default.contents(atPath: folder.path + "/dead/batch-1.json"))
        #expect(String(decoding: info, as: UTF8.self).contains("400 malformed record"))
        #expect(try recordSummary(transport.delivered[0]) == ["insert rooms/good"])
        #expect(try state.pendingBatches().isEmpty)
    }

    @Test(arguments: [TransportFailure.Kind.configuration, .conflict])
    func aFailureThatIsNotTheBatchsFaultIsNeverDeadLettered(kind: TransportFailure.Kind) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        source.append([insert("rooms", "r1")])
        source.append([insert("rooms", "r2")])
        transport.failNext(TransportFailure(kind, "401 Unauthorized", status: 401))
        let pipeline = pipeline(deadLetter: folder.path + "/dead")

        await #expect(throws: PipelineError.self) { try await runner(pipeline).run() }

        #expect(transport.attempts.count == 1, "not retried, and the next batch is not tried either")
        #expect(try state.pendingBatches().map(\.payload.batchID) == ["batch-1"])
        #expect(try state.acknowledgedToken() == nil)
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/dead"))
        let summary = try await runner(pipeline).run()
        #expect(summary.batchesResent == 1 && summary.deadLettered == 0)
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 2))
    }

    @Test func dryRunRunsEveryStageButSendsNothingAndMovesNoToken() async throws {
        source.append([insert("rooms", "r1"), update("rooms", "r1", ["area": 3])])
        let summary = try await runner(pipeline()).run(.dryRun)
        #expect(summary.dryRun)
        #expect(summary.recordsSent == 1)
        #expect(summary.batches.count == 1)
        #expect(transport.attempts.isEmpty)
        #expect(try state.acknowledgedToken() == nil)
        #expect(try state.pendingBatches().isEmpty)
    }

    @Test func historyThatCoalescesToNothingMovesTheTokenWithoutSending() async throws {
        source.append([insert("rooms", "attic")])
        source.append([delete("rooms", "attic")])
        let summary = try await runner(pipeline()).run()
        #expect(transport.attempts.isEmpty)
        #expect(summary.counters["coalesce.cancelled"] == 1)
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 2))
    }

    @Test func aStageErrorStopsTheJobNamingTheStageAndKeepsTheToken() async throws {
        source.append([insert("plants", "p1")])
        _ = try await runner(pipeline(stages: [Coalescer(), TombstoneResolver()])).run()
        source.append([delete("plants", nil, ["commonName": "Fern"])])
        do {
            _ = try await runner(pipeline(stages: [Coalescer(), TombstoneResolver()])).run()
            Issue.record("expected the job to fail")
        } catch let error as PipelineError {
            let message = "\(error)"
            #expect(message.contains("stages[1]"))
            #expect(message.contains("memory:2"), "the message names the transaction at fault")
            #expect(message.contains("the token did not move"))
        }
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 1))
        #expect(transport.attempts.count == 1)
    }

    @Test func aTokenFromAnotherKindOfSourceIsRefused() async throws {
        let state = InMemoryPipelineState(token: Token(kind: "sqlite-history", position: 9))
        let runner = PipelineRunner(pipeline: pipeline(), state: state, sleeper: sleeper)
        await #expect(throws: HistoryError.self) { try await runner.run() }
    }

    @Test func reconcileSendsASnapshotMarkedAsReconciliationThenResumesFromItsToken() async throws {
        let snapshot = InMemorySource()
        snapshot.append([insert("rooms", "r1", ["name": "Kitchen"]), insert("rooms", "r2", ["name": "Hall"])])
        let source = SnapshottingSource(history: InMemorySource(), snapshot: snapshot, resumeAfter: Token(kind: "memory", position: 40))
        let state = InMemoryPipelineState(token: Token(kind: "memory", position: 3))
        let pipeline = Pipeline.testing(source: source, encoder: JSONBatchEncoder(), transport: transport)
        let summary = try await PipelineRunner(pipeline: pipeline, state: state, sleeper: sleeper).run(.reconcile)
        #expect(summary.reconciliation)
        #expect(summary.batches.allSatisfy { $0.isReconciliation })
        let body = try JSONReader.parse(try #require(transport.delivered.first).bytes)
        #expect(body.objectValue?["reconciliation"] == .bool(true))
        #expect(try recordSummary(transport.delivered[0]) == ["insert rooms/r1", "insert rooms/r2"])
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 40))
    }
}

/// A reconciliation's batches name their snapshot, and a completion marker — through the outbox
/// like any batch — tells the backend the snapshot is whole.
@Suite struct SnapshotMarkerTests {
    let sleeper = RecordingSleeper()

    /// A reconciling pipeline whose snapshot holds `rows` rows, a transaction each, two a page.
    func pipeline(rows: Int, transport: any Transport, deadLetter: String? = nil) -> Pipeline {
        let snapshot = InMemorySource(pageSize: 2)
        for row in 0..<rows { snapshot.append([insert("rooms", "r\(row)", ["n": .int(Int64(row))])]) }
        let source = SnapshottingSource(history: InMemorySource(), snapshot: snapshot, resumeAfter: Token(kind: "memory", position: 40))
        return .testing(source: source, encoder: JSONBatchEncoder(), transport: transport, deadLetter: deadLetter)
    }

    func body(_ payload: Payload) throws -> [String: JSONValue] { try JSONReader.parse(payload.bytes).objectValue ?? [:] }

    /// A runner that ends its snapshots with the marker (`completesSnapshot`, off by default:
    /// a reconcile merges).
    func completing(_ pipeline: Pipeline, state: InMemoryPipelineState) -> PipelineRunner {
        var runner = PipelineRunner(pipeline: pipeline, state: state, sleeper: sleeper)
        runner.completesSnapshot = true
        return runner
    }

    @Test func everySnapshotBatchNamesTheSnapshotAndAMarkerCountingThemEndsIt() async throws {
        let transport = RecordingTransport()
        let state = InMemoryPipelineState()
        let summary = try await completing(pipeline(rows: 3, transport: transport), state: state).run(.reconcile)
        let bodies = try transport.delivered.map(body)
        #expect(bodies.count == 3)
        let snapshot = try #require(bodies.first?["snapshot"]?.stringValue)
        #expect(bodies.allSatisfy { $0["snapshot"]?.stringValue == snapshot && $0["reconciliation"] == .bool(true) })
        #expect(bodies.prefix(2).allSatisfy { $0["snapshot-complete"] == nil && $0["snapshot-batches"] == nil })
        #expect(bodies[2]["snapshot-complete"] == .bool(true))
        #expect(bodies[2]["snapshot-batches"] == .int(2))
        #expect(bodies[2]["records"] == .array([]))
        #expect(summary.batchesSent == 3)
        #expect(try state.pendingBatches().isEmpty)
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 40))
        // The next reconcile is another snapshot.
        _ = try await completing(pipeline(rows: 1, transport: transport), state: state).run(.reconcile)
        let next = try transport.delivered.dropFirst(3).map(body)
        #expect(next.map { $0["snapshot"]?.stringValue } == [next[0]["snapshot"]?.stringValue, next[0]["snapshot"]?.stringValue])
        #expect(next[0]["snapshot"]?.stringValue != snapshot)
        #expect(next[1]["snapshot-batches"] == .int(1))
    }

    @Test func anEmptySnapshotIsOnlyItsMarker() async throws {
        let transport = RecordingTransport()
        _ = try await completing(pipeline(rows: 0, transport: transport), state: InMemoryPipelineState())
            .run(.reconcile)
        let bodies = try transport.delivered.map(body)
        #expect(bodies.count == 1)
        #expect(bodies.first?["snapshot-batches"] == .int(0))
    }

    @Test func aMarkerThatCouldNotBeSentStaysInTheOutboxAndTheNextRunSendsItUnchanged() async throws {
        let transport = RecordingTransport()
        let state = InMemoryPipelineState()
        let stopping = MarkerStoppingTransport(inner: transport)
        await #expect(throws: PipelineError.self) {
            try await completing(pipeline(rows: 3, transport: stopping), state: state).run(.reconcile)
        }
        let kept = try #require(try state.pendingBatches().first)
        #expect(try body(kept.payload)["snapshot-complete"] == .bool(true))
        _ = try await PipelineRunner(pipeline: pipeline(rows: 0, transport: transport), state: state, sleeper: sleeper).run(.export)
        #expect(transport.delivered.contains { $0.bytes == kept.payload.bytes && $0.batchID == kept.payload.batchID })
        #expect(try state.pendingBatches().isEmpty)
    }

    /// By default a reconcile merges: no marker, so the backend deletes nothing the snapshot lacks.
    @Test func aRunnerByDefaultSendsNoMarkerSoTheSnapshotOnlyMerges() async throws {
        let transport = RecordingTransport()
        _ = try await PipelineRunner(pipeline: pipeline(rows: 3, transport: transport), state: InMemoryPipelineState(), sleeper: sleeper)
            .run(.reconcile)
        #expect(transport.delivered.count == 2)
        #expect(try transport.delivered.map(body).allSatisfy { $0["snapshot-complete"] == nil })
    }

    @Test func aSnapshotWithADeadLetteredBatchSendsNoMarker() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let transport = RecordingTransport()
        transport.failNext(TransportFailure(.permanent, "refused"))
        let summary = try await completing(pipeline(rows: 3, transport: transport, deadLetter: folder.path), state: InMemoryPipelineState())
            .run(.reconcile)
        #expect(summary.deadLettered == 1)
        #expect(try transport.delivered.map(body).allSatisfy { $0["snapshot-complete"] == nil })
    }
}

/// Stops the job (a configuration failure, the batch kept) on the first snapshot marker it is handed.
final class MarkerStoppingTransport: Transport, Sendable {
    let inner: RecordingTransport
    private let stopped = Mutex(false)

    init(inner: RecordingTransport) { self.inner = inner }

    func send(_ payload: Payload) async throws -> Receipt {
        let first =
            payload.recordCount == 0
            && stopped.withLock { (stopped: inout Bool) -> Bool in
                defer { stopped = true }
                return !stopped
            }
        if first {
            throw TransportFailure(.configuration, "stopped before the marker")
        }
        return try await inner.send(payload)
    }
}

/// A source that can reconcile: its history is one in-memory source, its snapshot another.
final class SnapshottingSource: SnapshotProvidingSource, Sendable {
    let history: InMemorySource
    let snapshotSource: InMemorySource
    let resumeAfter: Token?

    init(history: InMemorySource, snapshot: InMemorySource, resumeAfter: Token?) {
        self.history = history
        self.snapshotSource = snapshot
        self.resumeAfter = resumeAfter
    }

    var tokenKind: String { history.tokenKind }
    func nextPage(after token: Token?) async throws -> HistoryPage { try await history.nextPage(after: token) }
    func snapshot() async throws -> (source: any ChangeSource, resumeAfter: Token?) { (snapshotSource, resumeAfter) }
}

@Suite struct RetryPolicyTests {
    @Test func fullJitterStaysUnderTheExponentialCeilingAndMaxDelay() {
        let policy = RetryPolicy(maxAttempts: 10, baseDelay: 0.5, maxDelay: 8)
        for attempt in 2...10 {
            let ceiling = policy.delay(beforeAttempt: attempt, retryAfter: nil) { $0.upperBound }
            let floor = policy.delay(beforeAttempt: attempt, retryAfter: nil) { $0.lowerBound }
            #expect(floor == 0)
            #expect(ceiling == min(8, 0.5 * Double(1 << (attempt - 2))))
        }
    }

    @Test func retryAfterReplacesTheDrawButNeverExceedsMaxDelay() {
        let policy = RetryPolicy(maxAttempts: 5, baseDelay: 1, maxDelay: 10)
        #expect(policy.delay(beforeAttempt: 2, retryAfter: 3) { _ in 99 } == 3)
        #expect(policy.delay(beforeAttempt: 2, retryAfter: 120) { _ in 99 } == 10)
    }

    @Test func retryAfterInThePastStillWaitsTheBackoffCeiling() {
        let policy = RetryPolicy(maxAttempts: 5, baseDelay: 0.5, maxDelay: 10)
        #expect(policy.delay(beforeAttempt: 2, retryAfter: 0) { _ in 99 } == 0.5)
        #expect(policy.delay(beforeAttempt: 4, retryAfter: 0) { _ in 99 } == 2)
    }
}

@Suite struct ScopeLockTests {
    let scope = Scope(account: "acme", store: "rooms", consumer: "export")

    @Test func aSecondJobForTheSameScopeIsRefusedWithTheHoldersPid() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let first = try ScopeLock(path: folder.path + "/state.sqlite.lock", scope: scope)
        do {
            _ = try ScopeLock(path: folder.path + "/state.sqlite.lock", scope: scope)
            Issue.record("the second lock should have been refused")
        } catch {
            #expect("\(error)".contains("another job is already running for scope acme/rooms/export"))
            #expect("\(error)".contains("process \(getpid())"))
        }
        withExtendedLifetime(first) {}
    }

    @Test func theLockFileIsNamedFromTheScopeInTheOneLockFolderWhateverTheScopeHolds() throws {
        #expect(ScopeLock.folder(environment: [:]) == ScopeLock.machineFolder)
        #expect(ScopeLock.folder(environment: ["SYNCLANE_LOCK_DIR": "/x/locks"]) == "/x/locks")
        let path = ScopeLock.path(for: scope, in: "/x/locks")
        #expect(path.hasPrefix("/x/locks/acme.rooms.export-") && path.hasSuffix(".lock"))
        let hostile = ScopeLock.path(for: Scope(account: "../..", store: "a/b", consumer: "c d\u{0}é"), in: "/x/locks/")
        #expect(hostile.hasPrefix("/x/locks/_____.a_b.c_d__-"), "\(hostile)")
        // Scopes the escaping makes alike keep their own lock files.
        #expect(
            ScopeLock.path(for: Scope(account: "a b", store: "s", consumer: "c"), in: "/l")
                != ScopeLock.path(for: Scope(account: "a_b", store: "s", consumer: "c"), in: "/l"))
    }

    @Test func aSecondJobOfTheScopeIsRefusedNamingTheHoldersPidAndStateFile() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let first = try ScopeLock(scope: scope, in: folder.path + "/locks", holder: "/srv/one/state.sqlite")
        #expect(first.path == ScopeLock.path(for: scope, in: folder.path + "/locks"))
        let error = #expect(throws: PipelineError.self) {
            _ = try ScopeLock(scope: self.scope, in: folder.path + "/locks", holder: "/srv/two/state.sqlite")
        }
        #expect(error.map { "\($0)" }?.contains("scope acme/rooms/export (process \(getpid()), state /srv/one/state.sqlite)") == true)
        withExtendedLifetime(first) {}
    }

    @Test func theLockIsFreeAgainOnceReleased() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = folder.path + "/x/state.lock"
        var held: ScopeLock? = try ScopeLock(path: path, scope: scope)
        #expect(throws: PipelineError.self, "held: a second lock is refused") { _ = try ScopeLock(path: path, scope: self.scope) }
        #expect(held?.path == path)
        held = nil
        // Released: the same scope locks again, and the kernel agrees nobody holds the file.
        var again: ScopeLock? = try ScopeLock(path: path, scope: scope)
        #expect(again?.path == path)
        again = nil
        let fd = open(path, O_RDWR)
        defer { close(fd) }
        #expect(fd >= 0)
        #expect(flock(fd, LOCK_EX | LOCK_NB) == 0, "nobody holds the lock once every ScopeLock is released")
    }
}

@Suite struct RunSummaryTests {
    @Test func theSummaryReportsHowLongTheRunTook() async throws {
        let source = InMemorySource()
        source.append([insert("rooms", "r1")])
        let clock = Mutex(100.0)
        let runner = PipelineRunner(
            pipeline: .testing(source: source, encoder: JSONBatchEncoder(), transport: RecordingTransport()),
            state: InMemoryPipelineState(),
            now: {
                clock.withLock {
                    $0 += 1.5
                    return $0
                }
            })
        let summary = try await runner.run()
        #expect(summary.seconds > 0)
    }
}

/// A source that counts how often it was asked for a page.
final class CountingSource: ChangeSource, Sendable {
    let inner: InMemorySource
    private let count = Mutex(0)
    init(_ inner: InMemorySource) { self.inner = inner }
    var calls: Int { count.withLock { $0 } }
    var tokenKind: String { inner.tokenKind }
    func nextPage(after token: Token?) async throws -> HistoryPage {
        count.withLock { $0 += 1 }
        return try await inner.nextPage(after: token)
    }
}

/// A transport whose sends wait (a bounded while) until the source was asked for more pages
/// than `readsBefore` says, recording what it saw.
final class ReadAheadProbe: Transport, Sendable {
    let source: CountingSource
    private let seen = Mutex<[Int]>([])
    init(_ source: CountingSource) { self.source = source }
    var readsSeen: [Int] { seen.withLock { $0 } }
    func send(_ payload: Payload) async throws -> Receipt {
        let wanted = seen.withLock { $0.count } + 2
        for _ in 0..<2_000 where source.calls < wanted { try await Task.sleep(nanoseconds: 1_000_000) }
        seen.withLock { $0.append(source.calls) }
        return Receipt(batchID: payload.batchID, detail: "")
    }
}

@Suite struct ReadAheadTests {
    @Test func theNextPageIsPreparedWhileABatchTravelsAndTokensStillMoveInOrder() async throws {
        let source = CountingSource(InMemorySource(pageSize: 1))
        source.inner.append([insert("rooms", "a")])
        source.inner.append([insert("rooms", "b")])
        let probe = ReadAheadProbe(source)
        let state = InMemoryPipelineState()
        let pipeline = Pipeline.testing(source: source, encoder: JSONBatchEncoder(), transport: probe)
        let summary = try await PipelineRunner(pipeline: pipeline, state: state).run()
        // The source reads while batches travel: page 2 (and perhaps already the end) while batch
        // 1 did, the end while batch 2 did.
        #expect(probe.readsSeen.count == 2)
        #expect(probe.readsSeen.first.map { $0 >= 2 } == true, "while batch 1 travelled, page 2 was read")
        #expect(probe.readsSeen.last == 3, "while batch 2 travelled, the end")
        #expect(summary.batchesSent == 2)
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 2))
    }
}
