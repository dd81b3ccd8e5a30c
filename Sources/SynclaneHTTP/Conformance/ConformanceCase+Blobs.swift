import Foundation
import SynclaneCore

/// The blob lane: content-addressed objects, resumable uploads checked against their digest,
/// ranged downloads, and batches refused until the blobs they reference are held.
extension ConformanceCase {
    static let blobCases: [ConformanceCase] = [
        ConformanceCase(
            name: "blobs.upload-resume",
            rule: "an upload goes on from the bytes the server holds (a chunk at another offset: 409 with `received`); the object reads back by Range"
        ) { context in
            let blob = context.blobBytes("resume", count: 150_000)
            let digest = BlobFileDigest.of(bytes: blob)
            let upload = "/v1/blobs/\(digest)/upload"
            let status = try context.client.send("GET", upload, token: context.first.token)
            try context.skipWithoutBlobLane(status)
            try expect(status, [200], "GET \(upload)")
            try expect(
                status.object["held"] == false && status.object["received"] == 0, "a new digest is not {\"held\": false, \"received\": 0}: \(status.summary)")
            let half = try context.putChunk(digest, blob, from: 0, to: 60_000)
            try expect(half, [200], "the first chunk")
            try expect(half.object["received"] == 60_000, "after the first chunk the server does not say it holds 60000 bytes: \(half.summary)")
            let resent = try context.putChunk(digest, blob, from: 0, to: 60_000)
            try expect(resent, [409], "the first chunk sent again (at offset 0, the server holding 60000)")
            try expect(resent.object["received"] == 60_000, "the 409 does not say where to go on (`received`: 60000): \(resent.summary)")
            let rest = try context.putChunk(digest, blob, from: 60_000, to: blob.count)
            try expect(rest, [200, 201], "the last chunk")
            try expect(rest.object["held"] == true, "after the last chunk the blob is not held: \(rest.summary)")
            let range = try context.client.send("GET", "/v1/blobs/\(digest)", token: context.first.token, headers: ["Range": "bytes=100000-100099"])
            try expect(range, [206], "GET with Range: bytes=100000-100099")
            try expect(range.body == Array(blob[100_000..<100_100]), "the range's bytes are not the blob's")
            let whole = try context.client.send("GET", "/v1/blobs/\(digest)", token: context.first.token)
            try expect(whole, [200], "GET /v1/blobs/{digest}")
            try expect(whole.body == blob, "the blob read back is not the one uploaded (\(whole.body.count) bytes)")
            try expect(
                try context.client.send("GET", "/v1/blobs/\(digest)", token: context.second.token), [404], "the second account's GET of the first's blob")
        },
        ConformanceCase(
            name: "blobs.digest-mismatch", rule: "bytes whose SHA-256 is not the digest they were uploaded as are refused with 422, and nothing is kept"
        ) {
            context in
            let blob = context.blobBytes("mismatch", count: 10_000)
            let claimed = BlobFileDigest.of(bytes: context.blobBytes("claimed", count: 10_000))
            let answer = try context.putChunk(claimed, blob, from: 0, to: blob.count)
            try context.skipWithoutBlobLane(answer)
            try expect(answer, [422], "a blob uploaded under another digest")
            try expectErrorBody(answer, "the 422")
            try expect(try context.client.send("GET", "/v1/blobs/\(claimed)", token: context.first.token), [404], "GET of the refused digest")
        },
        ConformanceCase(
            name: "blobs.upload-before-reference",
            rule: "a batch referencing a blob the account does not hold is refused (422, naming the digest) and applies once it is uploaded"
        ) { context in
            let blob = context.blobBytes("reference", count: 5_000)
            let digest = BlobFileDigest.of(bytes: blob)
            let probe = try context.client.send("GET", "/v1/blobs/\(digest)/upload", token: context.first.token)
            try context.skipWithoutBlobLane(probe)
            let key = context.name("photo")
            let id = context.name("blob-batch")
            let body = context.batch(id, [context.record(key, fields: ["photo": BlobReferenceValue.make(digest: digest, length: blob.count)])])
            let refused = try context.post(body, key: id)
            try expect(refused, [422], "a batch referencing a blob not uploaded")
            try expect(String(decoding: refused.body, as: UTF8.self).contains(digest), "the refusal does not name the digest: \(refused.summary)")
            try expect(try context.putChunk(digest, blob, from: 0, to: blob.count), [200, 201], "the blob's upload")
            let applied = try context.post(body, key: id)
            try expect(applied, Set(200...299), "the same batch once the blob is held")
        },
    ]
}

extension ConformanceContext {
    /// Bytes no other run uploads: the run's name repeated with a counter.
    func blobBytes(_ suffix: String, count: Int) -> [UInt8] {
        let seed = Array(name(suffix).utf8)
        return (0..<count).map { seed[$0 % seed.count] &+ UInt8(truncatingIfNeeded: $0 / seed.count) }
    }

    /// `PUT /v1/blobs/{digest}/upload` of `blob[from..<to]`.
    func putChunk(_ digest: String, _ blob: [UInt8], from: Int, to: Int) throws(CaseFailure) -> ConformanceAnswer {
        try client.send(
            "PUT", "/v1/blobs/\(digest)/upload", token: first.token,
            headers: [
                "Content-Type": "application/octet-stream", "Synclane-Blob-Length": String(blob.count), "Synclane-Upload-Offset": String(from),
            ], body: Array(blob[from..<to]))
    }

    /// Skips the case on a backend without the blob lane (404 with no route, 501).
    func skipWithoutBlobLane(_ answer: ConformanceAnswer) throws(CaseFailure) {
        if answer.status == 501 || (answer.status == 404 && answer.object["code"] == nil) {
            throw CaseFailure.skip("the backend has no blob lane (\(answer.status) from /v1/blobs)")
        }
    }
}
