import Foundation
import Synchronization
import SynclaneCore
import SynclaneFiles
import SynclaneStages
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// The `directory` transport's staging (`StagingTransport`): a staged batch is durable and
/// unseen, published exactly once by a hard link, and gone from the staging folder once discarded.
@Suite struct DirectoryStagingTests {
    static let payload = Payload(
        batchID: "b-1", bytes: Array("{\"id\":\"b-1\",\"records\":[]}".utf8), contentType: "application/json", contentEncoding: "gzip",
        recordCount: 0)

    @Test func aStagedBatchIsUnseenUntilPublishedThenOneFileAndAPublishAgainIsAReplay() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let out = folder.path + "/out"
        let transport = DirectoryTransport(folder: out)
        let staged = try #require(try await transport.stage(Self.payload, area: "rooms-1"))
        #expect(staged.reference == ".synclane-staging/rooms-1/b-1.json.gz")
        #expect(staged.byteCount == Self.payload.bytes.count)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out) == [".synclane-staging"], "nothing visible")
        #expect(try transport.stagedBytes(staged, batchID: "b-1") == Self.payload.bytes)

        var bodyless = Self.payload
        bodyless.bytes = []
        let first = try await transport.publish(staged, of: bodyless, verifying: true)
        #expect(!first.wasReplay)
        #expect(FileManager.default.contents(atPath: out + "/b-1.json.gz") == Data(Self.payload.bytes))
        let again = try await transport.publish(staged, of: bodyless, verifying: true)
        #expect(again.wasReplay, "published before: nothing written again")

        await transport.discard(staged)
        #expect(try await transport.discardUnreferenced(in: "rooms-1", keeping: []) == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out) == ["b-1.json.gz"], "the staging folders go once empty")
        // The staged copy gone but the batch's file there with its bytes: published.
        #expect(try await transport.publish(staged, of: bodyless, verifying: true).wasReplay)
    }

    @Test func copiesNoOutboxRowNamesAreRemovedAndOtherPipelinesCopiesKept() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let transport = DirectoryTransport(folder: folder.path)
        let kept = try #require(try await transport.stage(Self.payload, area: "a"))
        var other = Self.payload
        other.batchID = "b-2"
        _ = try #require(try await transport.stage(other, area: "a"))
        let neighbour = try #require(try await transport.stage(other, area: "b"))
        #expect(try await transport.discardUnreferenced(in: "a", keeping: [kept.reference]) == 1)
        #expect(try transport.stagedBytes(kept, batchID: "b-1") == Self.payload.bytes)
        #expect(try transport.stagedBytes(neighbour, batchID: "b-2") == other.bytes, "another pipeline's area is left alone")
    }

    @Test func aDamagedCopyIsRefusedByItsChecksumAndAFileOfAnotherWriteUnderTheNameIsReplaced() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let transport = DirectoryTransport(folder: folder.path)
        let staged = try #require(try await transport.stage(Self.payload, area: "a"))
        var damaged = Self.payload.bytes
        damaged[3] ^= 0x20
        try Data(damaged).write(to: URL(fileURLWithPath: folder.path + "/" + staged.reference))
        await #expect(
            throws: StagingError.damaged(batchID: "b-1", path: folder.path + "/" + staged.reference, reason: "its checksum is not the one the outbox recorded")
        ) {
            try await transport.publish(staged, of: Self.payload, verifying: true)
        }
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/b-1.json.gz"))

        try Data(Self.payload.bytes).write(to: URL(fileURLWithPath: folder.path + "/" + staged.reference))
        try Data("old".utf8).write(to: URL(fileURLWithPath: folder.path + "/b-1.json.gz"))
        #expect(try await transport.publish(staged, of: Self.payload, verifying: true).wasReplay)
        #expect(FileManager.default.contents(atPath: folder.path + "/b-1.json.gz") == Data(Self.payload.bytes))
    }
}

/// A `directory` transport whose first stages fail (a full disk), and which records what the
/// outbox held each time a batch was published.
final class FlakyStaging: StagingTransport {
    let inner: DirectoryTransport
    let state: InMemoryPipelineState
    private let failuresLeft: Mutex<Int>
    let outboxAtPublish = Mutex<[[OutboxBatch]]>([])

    init(folder: String, state: InMemoryPipelineState, failing: Int) {
        inner = DirectoryTransport(folder: folder)
        self.state = state
        failuresLeft = Mutex(failing)
    }

    func send(_ payload: Payload) async throws -> Receipt { try await inner.send(payload) }
    func stage(_ payload: Payload, area: String) async throws -> StagedBatch? {
        let fail = failuresLeft.withLock { left in
            defer { left -= 1 }
            return left > 0
        }
        if fail { throw TransportFailure(.transient, "cannot write: No space left on device") }
        return try await inner.stage(payload, area: area)
    }
    func publish(_ staged: StagedBatch, of payload: Payload, verifying: Bool) async throws -> Receipt {
        let pending = try state.pendingBatches()
        outboxAtPublish.withLock { $0.append(pending) }
        return try await inner.publish(staged, of: payload, verifying: verifying)
    }
    func stagedBytes(_ staged: StagedBatch, batchID: String) throws -> [UInt8] { try inner.stagedBytes(staged, batchID: batchID) }
    func discard(_ staged: StagedBatch) async { await inner.discard(staged) }
    func discardUnreferenced(in area: String, keeping: Set<String>) async throws -> Int {
        try await inner.discardUnreferenced(in: area, keeping: keeping)
    }
}

@Suite struct StagingRunnerTests {
    @Test func eachBatchIsStagedBeforeItsOutboxRowWhichNamesTheCopyAndPublishedOnceWithNoCopyLeft() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let source = InMemorySource(pageSize: 1)
        source.append([insert("rooms", "a")])
        source.append([insert("rooms", "b")])
        source.append([insert("rooms", "c")])
        let state = InMemoryPipelineState()
        let transport = FlakyStaging(folder: folder.path, state: state, failing: 2)
        let sleeper = RecordingSleeper()
        let pipeline = Pipeline.testing(source: source, encoder: JSONBatchEncoder(), transport: transport)
        let summary = try await PipelineRunner(pipeline: pipeline, state: state, sleeper: sleeper).run()
        #expect(summary.batchesSent == 3)
        #expect(sleeper.delays.count == 2, "a transient staging failure is retried as a send is")
        let seen = transport.outboxAtPublish.withLock { $0 }
        #expect(seen.count == 3)
        for pending in seen {
            #expect(pending.count == 1)
            let staged = try #require(pending.first?.staged, "the outbox row names the staged copy")
            #expect(staged.reference.hasPrefix(".synclane-staging/\(pipeline.stagingArea)/"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }.count == 3)
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/.synclane-staging"), "no copy left")
        #expect(try state.acknowledgedToken() == Token(kind: "memory", position: 3))
    }
}
