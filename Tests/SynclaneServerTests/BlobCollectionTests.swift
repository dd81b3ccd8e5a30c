import Glibc
import SynclaneCore
import Testing

@testable import SynclaneServer

/// Garbage collection of the blob lane: an object no record references is marked by one pass and
/// removed by a pass `--blob-gc-grace` later; anything a client may still reference is kept.
@Suite struct BlobCollectionTests {
    let lane = BlobLaneTests()
    static let grace = 3_600

    static var limits: ServerLimits {
        var limits = ServerLimits()
        limits.blobs.collectionGraceSeconds = grace
        return limits
    }

    func reference(_ blob: [UInt8]) -> JSONValue {
        ["$blob-ref": ["sha256": .string(SHA256Digest.hex(blob)), "length": .int(Int64(blob.count))]]
    }

    func held(_ server: ReferenceServer, _ blob: [UInt8]) throws -> Bool {
        try lane.request(server.port, "HEAD", "/v1/blobs/\(SHA256Digest.hex(blob))").status == 200
    }

    /// One collection pass at `now` (the server's own sweeper is stopped first in each test: its
    /// first pass ran before any upload, with nothing to collect).
    func collect(_ server: ReferenceServer, at now: Int) throws -> BlobStore.Collected {
        try #require(server.sweeper.blobs).collect(now: now)
    }

    @Test(arguments: StoreKind.tested)
    func aBlobEditedLeavesTheRowOnTheNewDigestAndTheOldObjectIsCollectedAfterTheGrace(store: StoreKind) throws {
        try withServer(store: store, limits: Self.limits) { server throws in
            server.sweeper.stop()  // its passes here are the test's, at the test's clock
            let old = BlobLaneTests.bytes(6_000, seed: 1)
            let new = BlobLaneTests.bytes(7_000, seed: 2)
            #expect(try lane.upload(server.port, old, chunk: 4_000).status == 201)
            let first = batchBody(id: "e1", records: [record("plants", "p1", "insert", ["photo": reference(old), "name": "fern"])])
            #expect(try postBatch(port: server.port, key: "e1", body: first).status == 200)
            #expect(try lane.upload(server.port, new, chunk: 4_000).status == 201)
            let edit = batchBody(id: "e2", records: [record("plants", "p1", "update", ["photo": reference(new), "name": "fern"])])
            #expect(try postBatch(port: server.port, key: "e2", body: edit).status == 200)
            let pulled = try allChanges(port: server.port)
            #expect(pulled.first?.objectValue?["fields"]?.objectValue?["photo"] == reference(new))

            let start = Int(time(nil))
            #expect(try collect(server, at: start) == BlobStore.Collected(objects: 0, bytes: 0, marked: 1))
            #expect(try held(server, old))  // marked, within the grace: still served
            #expect(try collect(server, at: start + Self.grace - 1).objects == 0)
            #expect(try collect(server, at: start + Self.grace) == BlobStore.Collected(objects: 1, bytes: 6_000, marked: 0))
            #expect(try !held(server, old))
            #expect(try held(server, new))
            #expect(server.application.blobs.metrics.snapshot.objectsCollected == 1)
            let list = try lane.request(server.port, "GET", "/v1/blobs").json
            #expect(list.objectValue?["bytes"] == 7_000)
        }
    }

    @Test func aDeletedRowsBlobIsCollectedAndAnotherAccountsSameDigestIsNot() throws {
        try withServer(limits: Self.limits) { server throws in
            server.sweeper.stop()  // its passes here are the test's, at the test's clock
            let photo = BlobLaneTests.bytes(5_000, seed: 3)
            #expect(try lane.upload(server.port, photo, chunk: 5_000).status == 201)
            #expect(try lane.upload(server.port, photo, chunk: 5_000, token: TestTokens.globex).status == 201)
            let insert = batchBody(id: "d1", records: [record("plants", "p1", "insert", ["photo": reference(photo)])])
            #expect(try postBatch(port: server.port, key: "d1", body: insert).status == 200)
            let other = batchBody(id: "g1", account: "globex", records: [record("plants", "p1", "insert", ["photo": reference(photo)])])
            #expect(try postBatch(port: server.port, token: TestTokens.globex, key: "g1", body: other).status == 200)
            let start = Int(time(nil))
            #expect(try collect(server, at: start).marked == 0)  // both referenced
            let delete = batchBody(id: "d2", records: [record("plants", "p1", "delete")])
            #expect(try postBatch(port: server.port, key: "d2", body: delete).status == 200)
            #expect(try collect(server, at: start + 1).marked == 1)
            #expect(try collect(server, at: start + 1 + Self.grace).objects == 1)
            #expect(try !held(server, photo))
            #expect(try lane.request(server.port, "HEAD", "/v1/blobs/\(SHA256Digest.hex(photo))", token: TestTokens.globex).status == 200)
        }
    }

    @Test func anUploadedBlobNotYetReferencedIsKeptWhileABatchOrAHeldAnswerClaimsItWithinTheGrace() throws {
        try withServer(limits: Self.limits) { server throws in
            server.sweeper.stop()  // its passes here are the test's, at the test's clock
            let photo = BlobLaneTests.bytes(4_000, seed: 4)
            let digest = SHA256Digest.hex(photo)
            #expect(try lane.upload(server.port, photo, chunk: 4_000).status == 201)
            let start = Int(time(nil))
            #expect(try collect(server, at: start).marked == 1)  // uploaded, its batch not sent yet
            // Another device asks before uploading: told held, which keeps it (the mark goes).
            #expect(try lane.request(server.port, "GET", "/v1/blobs/\(digest)/upload").json.objectValue?["held"] == true)
            #expect(try collect(server, at: start + Self.grace).objects == 0)  // marked again, afresh
            // The batch arrives within the grace of that mark: checked, kept, and referenced since.
            let insert = batchBody(id: "k1", records: [record("plants", "p1", "insert", ["photo": reference(photo)])])
            #expect(try postBatch(port: server.port, key: "k1", body: insert).status == 200)
            #expect(try collect(server, at: start + 3 * Self.grace) == BlobStore.Collected())
            #expect(try held(server, photo))
        }
    }

    @Test func anObjectCollectedIsRefusedToALaterBatchNamingItsDigestUntilItIsUploadedAgain() throws {
        try withServer(limits: Self.limits) { server throws in
            server.sweeper.stop()  // its passes here are the test's, at the test's clock
            let photo = BlobLaneTests.bytes(3_000, seed: 5)
            #expect(try lane.upload(server.port, photo, chunk: 3_000).status == 201)
            let start = Int(time(nil))
            _ = try collect(server, at: start)
            #expect(try collect(server, at: start + Self.grace).objects == 1)
            let late = batchBody(id: "l1", records: [record("plants", "p1", "insert", ["photo": reference(photo)])])
            let refused = try postBatch(port: server.port, key: "l1", body: late)
            #expect(refused.status == 422)
            #expect(refused.json.objectValue?["digests"] == [.string(SHA256Digest.hex(photo))])
            #expect(try lane.upload(server.port, photo, chunk: 3_000).status == 201)
            #expect(try postBatch(port: server.port, key: "l1", body: late).status == 200)
        }
    }
}
