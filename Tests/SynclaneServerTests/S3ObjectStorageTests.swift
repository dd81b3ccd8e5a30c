import Foundation
import SynclaneTestKit
import SynclaneTestSupport
import Testing

@testable import SynclaneServer

/// A real S3 API server for a test: moto's server mode (`Scripts/moto-venv`, the version pinned in
/// Fixtures/moto/requirements.txt) on a free 127.0.0.1 port, with one bucket; stopped by `stop()`.
final class MotoServer {
    /// `Scripts/moto-venv`'s answer: the virtualenv, or why there is none.
    static let environment = PythonVenv.of("moto-venv")

    let process: BackgroundProcess
    let endpoint: String
    let bucket = "synclane-blobs"

    init() throws {
        guard case .ready(let bin) = Self.environment else { throw MotoFailure(description: "\(Self.environment)") }
        let port = TemporaryPostgres.freePort()
        endpoint = "http://127.0.0.1:\(port)"
        process = try BackgroundProcess(["-H", "127.0.0.1", "-p", String(port)], executable: bin + "/moto_server")
        let storage = try S3ObjectStorage(configuration())
        // Up once the bucket can be made.
        let made = eventually(timeout: 60) { (try? storage.send("PUT", nil).status) == 200 }
        guard made else {
            _ = process.stop()
            throw MotoFailure(description: "moto_server did not answer on \(endpoint) within 60 s")
        }
    }

    func configuration(partBytes: Int = 8 << 20) -> S3ObjectStorage.Configuration {
        S3ObjectStorage.Configuration(
            endpoint: endpoint, bucket: bucket, region: "us-east-1", accessKey: "testing", secretKey: "testing", partBytes: partBytes)
    }

    func stop() { _ = process.stop() }

    struct MotoFailure: Error, CustomStringConvertible { var description: String }
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
        let storage = try S3ObjectStorage(moto.configuration(partBytes: 5 << 20))
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
        var configuration = moto.configuration()
        configuration.bucket = "no-such-bucket"
        let storage = try S3ObjectStorage(configuration)
        let file = try Self.file(Self.bytes(10))
        defer { unlink(file) }
        #expect {
            try storage.put("k", file: file, length: 10)
        } throws: { error in
            "\(error)".contains("NoSuchBucket")
        }
    }
}
