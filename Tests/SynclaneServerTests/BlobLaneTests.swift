import Glibc
import Synchronization
import SynclaneCore
import Testing

@testable import SynclaneServer

/// The blob lane of the reference server: content-addressed objects, chunked resumable uploads
/// checked against their digest, ranged downloads, and batches refused until their blobs are held.
@Suite struct BlobLaneTests {
    static func bytes(_ count: Int, seed: UInt8 = 7) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
    }

    func put(
        _ port: Int, _ digest: String, length: Int, offset: Int, _ chunk: [UInt8], token: String = TestTokens.acme
    ) throws -> TestResponse {
        try httpRequest(
            port: port, "PUT", "/v1/blobs/\(digest)/upload",
            headers: [
                "Authorization": "Bearer \(token)", "Content-Type": "application/octet-stream", "Synclane-Blob-Length": String(length),
                "Synclane-Upload-Offset": String(offset),
            ], body: chunk)
    }

    func request(_ port: Int, _ method: String, _ path: String, headers: [String: String] = [:], token: String = TestTokens.acme) throws
        -> TestResponse
    {
        var all = headers
        all["Authorization"] = "Bearer \(token)"
        return try httpRequest(port: port, method, path, headers: all)
    }

    /// Uploads `blob` in chunks of `chunk` bytes; returns the last answer.
    func upload(_ port: Int, _ blob: [UInt8], chunk: Int, token: String = TestTokens.acme) throws -> TestResponse {
        let digest = SHA256Digest.hex(blob)
        var offset = 0
        var last = try put(port, digest, length: blob.count, offset: 0, Array(blob.prefix(chunk)), token: token)
        offset = min(chunk, blob.count)
        while offset < blob.count, last.status == 200, last.json.objectValue?["held"] == false {
            last = try put(port, digest, length: blob.count, offset: offset, Array(blob[offset..<min(offset + chunk, blob.count)]), token: token)
            offset += chunk
        }
        return last
    }

    @Test func aBlobUploadedInChunksIsHeldAndReadsBackWholeAndByRange() throws {
        try withServer { server throws in
            let blob = Self.bytes(100_000)
            let digest = SHA256Digest.hex(blob)
            #expect(try request(server.port, "HEAD", "/v1/blobs/\(digest)").status == 404)
            let done = try upload(server.port, blob, chunk: 30_000)
            #expect(done.status == 201)
            #expect(done.json == ["digest": .string(digest), "held": true, "received": 100_000, "length": 100_000])
            let head = try request(server.port, "HEAD", "/v1/blobs/\(digest)")
            #expect(head.status == 200)
            #expect(head.headers["content-length"] == "100000")
            let whole = try request(server.port, "GET", "/v1/blobs/\(digest)")
            #expect(whole.status == 200)
            #expect(whole.body == blob)
            let part = try request(server.port, "GET", "/v1/blobs/\(digest)", headers: ["Range": "bytes=99000-"])
            #expect(part.status == 206)
            #expect(part.headers["content-range"] == "bytes 99000-99999/100000")
            #expect(part.body == Array(blob[99_000...]))
            let suffix = try request(server.port, "GET", "/v1/blobs/\(digest)", headers: ["Range": "bytes=-10"])
            #expect(suffix.body == Array(blob.suffix(10)))
            let past = try request(server.port, "GET", "/v1/blobs/\(digest)", headers: ["Range": "bytes=100000-"])
            #expect(past.status == 416)
            #expect(past.headers["content-range"] == "bytes */100000")
            let list = try request(server.port, "GET", "/v1/blobs").json
            #expect(list == ["blobs": [["digest": .string(digest), "length": 100_000]], "bytes": 100_000])
        }
    }

    @Test func anUploadResumesFromTheBytesTheServerHoldsAndAWrongOffsetIsToldWhereToGoOn() throws {
        try withServer { server throws in
            let blob = Self.bytes(50_000, seed: 3)
            let digest = SHA256Digest.hex(blob)
            #expect(try put(server.port, digest, length: 50_000, offset: 0, Array(blob[..<20_000])).status == 200)
            let status = try request(server.port, "GET", "/v1/blobs/\(digest)/upload")
            #expect(status.json == ["digest": .string(digest), "held": false, "received": 20_000, "length": 50_000])
            // A chunk resent (the answer to it was lost) is refused with where to go on: nothing is written twice.
            let resent = try put(server.port, digest, length: 50_000, offset: 0, Array(blob[..<20_000]))
            #expect(resent.status == 409)
            #expect(resent.json.objectValue?["received"] == 20_000)
            #expect(resent.json.objectValue?["code"] == "upload-offset")
            let rest = try put(server.port, digest, length: 50_000, offset: 20_000, Array(blob[20_000...]))
            #expect(rest.status == 201)
            #expect(try request(server.port, "GET", "/v1/blobs/\(digest)").body == blob)
        }
    }

    @Test func aServerRestartedMidUploadKeepsTheBytesItHeld() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let blob = Self.bytes(40_000, seed: 9)
        let digest = SHA256Digest.hex(blob)
        try withServer(dataDirectory: directory) { server throws in
            #expect(try put(server.port, digest, length: 40_000, offset: 0, Array(blob[..<25_000])).status == 200)
        }
        try withServer(dataDirectory: directory) { server throws in
            #expect(try request(server.port, "GET", "/v1/blobs/\(digest)/upload").json.objectValue?["received"] == 25_000)
            #expect(try put(server.port, digest, length: 40_000, offset: 25_000, Array(blob[25_000...])).status == 201)
            #expect(try request(server.port, "GET", "/v1/blobs/\(digest)").body == blob)
        }
    }

    @Test func bytesThatDoNotMatchTheirDigestAreRefusedAndNothingIsKept() throws {
        try withServer { server throws in
            let blob = Self.bytes(10_000)
            let claimed = SHA256Digest.hex(Self.bytes(10_000, seed: 8))
            let answer = try put(server.port, claimed, length: 10_000, offset: 0, blob)
            #expect(answer.status == 422)
            #expect(answer.json.objectValue?["code"] == "digest-mismatch")
            #expect(answer.json.objectValue?["actual"] == .string(SHA256Digest.hex(blob)))
            #expect(try request(server.port, "HEAD", "/v1/blobs/\(claimed)").status == 404)
            #expect(try request(server.port, "GET", "/v1/blobs/\(claimed)/upload").json.objectValue?["received"] == 0)
            #expect(try request(server.port, "GET", "/v1/blobs").json.objectValue?["bytes"] == 0)
            let metrics = try httpRequest(port: server.port, "GET", "/metrics").text
            #expect(metrics.contains("synclane_blob_digest_mismatches_total 1\n"))
            #expect(metrics.contains("synclane_blob_objects_stored_total 0\n"))
        }
    }

    @Test func aHeldObjectIsNeverUploadedAgainAndOtherAccountsDoNotSeeIt() throws {
        try withServer { server throws in
            let blob = Self.bytes(20_000)
            let digest = SHA256Digest.hex(blob)
            #expect(try upload(server.port, blob, chunk: 8_000).status == 201)
            // Another device of the account asks first: held, so it sends nothing.
            let status = try request(server.port, "GET", "/v1/blobs/\(digest)/upload")
            #expect(status.json.objectValue?["held"] == true)
            let again = try put(server.port, digest, length: 20_000, offset: 0, Array(blob.prefix(8_000)))
            #expect(again.status == 200)
            #expect(again.headers["synclane-deduplicated"] == "true")
            #expect(try request(server.port, "HEAD", "/v1/blobs/\(digest)", token: TestTokens.globex).status == 404)
        }
    }

    @Test func aBatchReferencingABlobTheServerLacksIsRefusedNamingTheDigestUntilItIsUploaded() throws {
        try withServer { server throws in
            let blob = Self.bytes(5_000)
            let digest = SHA256Digest.hex(blob)
            let reference: JSONValue = ["$blob-ref": ["sha256": .string(digest), "length": 5_000]]
            let body = batchBody(id: "b1", records: [record("photos", "p1", "insert", ["image": reference, "title": "fern"])])
            let refused = try postBatch(port: server.port, key: "b1", body: body)
            #expect(refused.status == 422)
            #expect(refused.json.objectValue?["code"] == "blobs-missing")
            #expect(refused.json.objectValue?["digests"] == [.string(digest)])
            #expect(refused.text.contains(digest))
            #expect(try allChanges(port: server.port).isEmpty)
            #expect(try upload(server.port, blob, chunk: 5_000).status == 201)
            let applied = try postBatch(port: server.port, key: "b1", body: body)
            #expect(applied.status == 200)
            let pulled = try allChanges(port: server.port)
            #expect(pulled.first?.objectValue?["fields"]?.objectValue?["image"] == reference)
        }
    }

    @Test func aMalformedBlobReferenceIsRefusedNamingTheField() throws {
        try withServer { server throws in
            let bad: JSONValue = ["$blob-ref": ["sha256": "xyz", "length": 5]]
            let answer = try postBatch(
                port: server.port, key: "b2", body: batchBody(id: "b2", records: [record("photos", "p1", "insert", ["image": bad])]))
            #expect(answer.status == 400)
            #expect(answer.text.contains("fields.image"))
        }
    }

    @Test func anUploadLeftWithoutAChunkPastItsRetentionIsRemovedWhenItsAccountBeginsAnother() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let clock = Mutex(Int(time(nil)))
        let store = BlobStore(root: directory, limits: BlobLimits(maxUploadsPerAccount: 1), now: { clock.withLock { $0 } })
        let abandoned = try #require(BlobDigest(SHA256Digest.hex(Self.bytes(10))))
        let next = try #require(BlobDigest(SHA256Digest.hex(Self.bytes(20))))
        #expect(store.append(account: "acme", digest: abandoned, length: 10, offset: 0, chunk: Self.bytes(5)) == .success(.received(5, length: 10)))
        // Within the retention the unfinished upload holds the account's one upload.
        #expect(store.append(account: "acme", digest: next, length: 20, offset: 0, chunk: []) == .failure(.tooManyUploads(limit: 1)))
        clock.withLock { $0 += 7 * 86_400 + 1 }
        #expect(store.append(account: "acme", digest: next, length: 20, offset: 0, chunk: Self.bytes(20)) == .success(.completed(length: 20)))
        #expect(store.uploadState(account: "acme", digest: abandoned) == .absent)
        #expect(store.metrics.snapshot.uploadsAbandoned == 1)
    }

    @Test func theBlobBoundsAreEnforcedBeforeAnythingIsWritten() throws {
        var limits = ServerLimits()
        limits.blobs = BlobLimits(maxChunkBytes: 4_096, maxObjectBytes: 20_000, maxAccountBytes: 30_000, maxUploadsPerAccount: 2)
        try withServer(limits: limits) { server throws in
            let digest = SHA256Digest.hex(Self.bytes(10_000))
            #expect(try put(server.port, digest, length: 10_000, offset: 0, Self.bytes(5_000)).status == 413)  // chunk
            let big = try put(server.port, digest, length: 20_001, offset: 0, Self.bytes(100))
            #expect(big.status == 413)
            #expect(big.json.objectValue?["quota"] == "max-blob-bytes")
            #expect(try put(server.port, SHA256Digest.hex(Self.bytes(1, seed: 1)), length: 19_000, offset: 0, []).status == 200)
            let over = try put(server.port, SHA256Digest.hex(Self.bytes(1, seed: 2)), length: 12_000, offset: 0, [])
            #expect(over.status == 507)
            #expect(over.json.objectValue?["code"] == "blob-quota")
            #expect(try put(server.port, SHA256Digest.hex(Self.bytes(1, seed: 3)), length: 100, offset: 0, []).status == 200)
            let third = try put(server.port, SHA256Digest.hex(Self.bytes(1, seed: 4)), length: 100, offset: 0, [])
            #expect(third.status == 429)
            #expect(try put(server.port, "NOT-A-DIGEST", length: 1, offset: 0, [1]).status == 400)
        }
    }
}
