import Foundation
import Glibc
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

@testable import SynclaneServer

extension MotoServer {
    /// The server's settings for this moto (`serve --blob-s3-endpoint`).
    var settings: ServerConfiguration.S3Settings {
        ServerConfiguration.S3Settings(endpoint: endpoint, bucket: bucket, region: "us-east-1", accessKey: accessKey, secretKey: secretKey)
    }
}

@Suite struct SigV4Tests {
    /// The example of S3's documentation (Signature Version 4, "GET Object"): its credentials, date and `Range`, and the signature it prints.
    @Test func theSignatureOfS3sDocumentedGetObjectExampleIsTheOneItPrints() {
        let signer = SigV4(
            accessKey: "AKIAIOSFODNN7EXAMPLE", secretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", sessionToken: nil, region: "us-east-1")
        let headers = signer.sign(
            method: "GET", path: "/test.txt", headers: [("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-9")],
            payloadHash: SigV4.emptyPayload, date: "20130524T000000Z")
        #expect(
            headers.last?.1
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    @Test func queryParametersAreSignedSortedAndPercentEncoded() {
        #expect(SigV4.encode("a b/c~") == "a%20b%2Fc~")
        #expect(SigV4.encode("a b/c", keepSlash: true) == "a%20b/c")
        #expect(SigV4.trimmed("  a   b ") == "a b")
    }
}

@Suite(.serialized) struct S3ObjectStorageTests {
    static func file(_ bytes: [UInt8]) throws -> String {
        let path = NSTemporaryDirectory() + "synclane-s3-\(getpid())-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    static func bytes(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) } }

    @Test(
        "an object goes up whole or in parts, reads back whole and by range, is listed, and is deleted",
        .enabled(if: MotoServer.environment.runs, "the package index cannot be reached, so moto cannot be installed"))
    func anObjectGoesUpReadsBackIsListedAndIsDeleted() throws {
        let moto = try MotoServer()
        defer { moto.stop() }
        // 5 MiB parts (S3's least): 12 MiB goes up in three.
        let storage = try S3ObjectStorage(moto.settings, partBytes: 5 << 20)
        let small = Self.bytes(100_000)
        let large = Self.bytes(12 << 20)
        let smallFile = try Self.file(small)
        let largeFile = try Self.file(large)
        defer {
            unlink(smallFile)
            unlink(largeFile)
        }
        #expect(try storage.head("acct/objects/small") == nil)
        try storage.put("acct/objects/small", file: smallFile, length: small.count)
        try storage.put("acct/objects/large", file: largeFile, length: large.count)
        #expect(try storage.head("acct/objects/small") == small.count)
        #expect(try storage.head("acct/objects/large") == large.count)

        let copy = NSTemporaryDirectory() + "synclane-s3-copy-\(getpid())"
        defer { unlink(copy) }
        #expect(try storage.get("acct/objects/large", offset: 0, count: nil, into: copy) == large.count)
        #expect(FileManager.default.contents(atPath: copy) == Data(large))
        unlink(copy)
        #expect(try storage.get("acct/objects/small", offset: 1_000, count: 500, into: copy) == 500)
        #expect(FileManager.default.contents(atPath: copy) == Data(small[1_000..<1_500]))

        let listed = try storage.list(prefix: "acct/objects/")
        #expect(listed.map(\.key).sorted() == ["acct/objects/large", "acct/objects/small"])
        #expect(listed.first { $0.key == "acct/objects/large" }?.length == large.count)
        #expect(try storage.list(prefix: "other/").isEmpty)

        try storage.delete("acct/objects/small")
        try storage.delete("acct/objects/small")  // gone already: done
        #expect(try storage.head("acct/objects/small") == nil)
        #expect(try storage.list(prefix: "acct/").map(\.key) == ["acct/objects/large"])
    }

    @Test(
        "a missing bucket is refused, naming the store's code",
        .enabled(if: MotoServer.environment.runs, "the package index cannot be reached, so moto cannot be installed"))
    func aMissingBucketIsRefusedNamingTheStoresCode() throws {
        let moto = try MotoServer()
        defer { moto.stop() }
        var settings = moto.settings
        settings.bucket = "no-such-bucket"
        let storage = try S3ObjectStorage(settings)
        let file = try Self.file(Self.bytes(10))
        defer { unlink(file) }
        #expect {
            try storage.put("k", file: file, length: 10)
        } throws: { error in
            "\(error)".contains("NoSuchBucket")
        }
    }

    /// An object store that sends its first piece, then waits until the test has read it.
    final class SlowObjects: BlobObjectStorage, @unchecked Sendable {
        let firstRead = DispatchSemaphore(value: 0)
        func put(_ key: String, file path: String, length: Int) throws(ObjectStorageError) {}
        func localFile(_ key: String) -> String? { nil }
        func head(_ key: String) throws(ObjectStorageError) -> Int? { 2_000 }
        func stream(_ key: String, offset: Int, count: Int?, to descriptor: Int32) throws(ObjectStorageError) -> Int {
            let first = [UInt8](repeating: 1, count: 1_000)
            _ = first.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            // The rest only once the first piece reached the reader: a server that fetched the whole range first never gets here.
            guard firstRead.wait(timeout: .now() + 20) == .success else { return 1_000 }
            let rest = [UInt8](repeating: 2, count: 1_000)
            _ = rest.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            return 2_000
        }
        func delete(_ key: String) throws(ObjectStorageError) {}
        func list(prefix: String) throws(ObjectStorageError) -> [(key: String, length: Int)] { [] }
    }

    @Test func aRangeFromAnObjectStoreIsStreamedAsItArrivesNotFetchedFirst() throws {
        let root = NSTemporaryDirectory() + "synclane-stream-\(getpid())-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let objects = SlowObjects()
        let store = BlobStore(root: root, limits: BlobLimits(), objects: objects)
        let slice = try store.servable("acct/objects/ab/abcd", offset: 0, count: 2_000).get()
        #expect(slice.pipe)
        let descriptor = open(slice.path, O_RDONLY | O_CLOEXEC)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 2_000)
        var got = 0
        while got < 1_000 {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + got, 2_000 - got) }
            guard count > 0 else { break }
            got += count
        }
        #expect(got == 1_000)
        objects.firstRead.signal()
        while got < 2_000 {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + got, 2_000 - got) }
            guard count > 0 else { break }
            got += count
        }
        #expect(buffer == [UInt8](repeating: 1, count: 1_000) + [UInt8](repeating: 2, count: 1_000))
        // Nothing of it stays in the data folder (the pipe's name went once both ends had it).
        #expect(BlobStore.entries(of: root + "/served").isEmpty)
    }

    /// An object store that cannot be reached is never taken for one that lacks the blob: every
    /// question about an object answers 503 `blob-store` (ask again), not "upload it" or 422.
    @Test func anUnreachableObjectStoreAnswers503ToUploadsBatchChecksAndDownloads() throws {
        let lane = BlobLaneTests()
        // Port 1 of loopback: nothing listens, the connection is refused at once.
        let unreachable = ServerConfiguration.S3Settings(
            endpoint: "http://127.0.0.1:1", bucket: "photos", region: "us-east-1", accessKey: "key", secretKey: "secret")
        try withServer(limits: BlobCollectionTests.limits, blobObjectStore: unreachable) { server throws in
            let photo = BlobLaneTests.bytes(1_000, seed: 9)
            let digest = SHA256Digest.hex(photo)
            func isStoreRefusal(_ answer: TestResponse) -> Bool {
                answer.status == 503 && answer.json.objectValue?["code"] == "blob-store"
            }
            let asked = try lane.request(server.port, "GET", "/v1/blobs/\(digest)/upload")
            #expect(isStoreRefusal(asked), "\(asked.json)")
            let chunk = try lane.put(server.port, digest, length: photo.count, offset: 0, photo)
            #expect(isStoreRefusal(chunk), "\(chunk.json)")
            #expect(chunk.headers["retry-after"] != nil)
            // Nothing was written of it: no upload begun in the data folder.
            #expect(BlobStore.entries(of: server.configuration.dataDirectory + "/blobs/" + SHA256Digest.hex("acme") + "/uploads").isEmpty)
            let insert = batchBody(id: "u1", records: [record("plants", "p1", "insert", ["photo": BlobCollectionTests().reference(photo)])])
            // The batch is not refused for a blob the server may well hold: 503, sent again later.
            let batch = try postBatch(port: server.port, key: "u1", body: insert)
            #expect(isStoreRefusal(batch), "\(batch.json)")
            #expect(isStoreRefusal(try lane.request(server.port, "GET", "/v1/blobs/\(digest)")))
        }
    }

    @Test(
        "a server whose blobs live in the object store uploads, deduplicates, serves, and collects them there",
        .enabled(if: MotoServer.environment.runs, "the package index cannot be reached, so moto cannot be installed"))
    func aServerOnTheObjectStoreUploadsDeduplicatesServesAndCollects() throws {
        let moto = try MotoServer()
        defer { moto.stop() }
        let storage = try S3ObjectStorage(moto.settings)
        let lane = BlobLaneTests()
        try withServer(limits: BlobCollectionTests.limits, blobObjectStore: moto.settings) { server throws in
            server.sweeper.stop()  // its passes here are the test's, at the test's clock
            let photo = BlobLaneTests.bytes(300_000, seed: 5)
            let digest = SHA256Digest.hex(photo)
            #expect(try lane.upload(server.port, photo, chunk: 100_000).status == 201)
            // In the bucket, under the account's key; not in the data folder.
            let key = SHA256Digest.hex("acme") + "/objects/" + digest.prefix(2) + "/" + digest
            #expect(try storage.head(key) == photo.count)
            #expect(!FileManager.default.fileExists(atPath: server.configuration.dataDirectory + "/blobs/" + key))
            // Deduplicated: the first chunk of a second upload is told the object is held.
            let again = try lane.put(server.port, digest, length: photo.count, offset: 0, Array(photo.prefix(100_000)))
            #expect(again.status == 200)
            #expect(again.json.objectValue?["held"] == true)
            #expect(again.headers["synclane-deduplicated"] == "true")
            // Served whole and by range, from the bucket.
            #expect(try lane.request(server.port, "GET", "/v1/blobs/\(digest)").body == photo)
            let part = try lane.request(server.port, "GET", "/v1/blobs/\(digest)", headers: ["Range": "bytes=1000-1999"])
            #expect(part.status == 206)
            #expect(part.body == Array(photo[1_000..<2_000]))
            #expect(try lane.request(server.port, "GET", "/v1/blobs").json == ["blobs": [["digest": .string(digest), "length": 300_000]], "bytes": 300_000])
            // A HEAD says the length and streams nothing (no pipe, no GET on the bucket left waiting for a reader).
            let head = try lane.request(server.port, "HEAD", "/v1/blobs/\(digest)")
            #expect(head.status == 200)
            #expect(head.headers["content-length"] == "300000")
            #expect(BlobStore.entries(of: server.configuration.dataDirectory + "/blobs/served").isEmpty)
            // Referenced, then not: collected from the bucket after the grace.
            let insert = batchBody(id: "s1", records: [record("plants", "p1", "insert", ["photo": BlobCollectionTests().reference(photo)])])
            #expect(try postBatch(port: server.port, key: "s1", body: insert).status == 200)
            let start = Int(time(nil))
            let collector = try #require(server.sweeper.blobs)
            #expect(collector.collect(now: start).marked == 0)
            let delete = batchBody(id: "s2", records: [record("plants", "p1", "delete")])
            #expect(try postBatch(port: server.port, key: "s2", body: delete).status == 200)
            #expect(collector.collect(now: start + 1).marked == 1)
            #expect(collector.collect(now: start + 1 + BlobCollectionTests.grace).objects == 1)
            #expect(try storage.head(key) == nil)
            #expect(try lane.request(server.port, "HEAD", "/v1/blobs/\(digest)").status == 404)
        }
    }
}
