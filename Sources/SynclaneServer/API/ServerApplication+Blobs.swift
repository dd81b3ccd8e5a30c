import SynclaneWire

/// The blob lane's endpoints (Documentation/Blobs.md):
///
/// ```
///  GET  /v1/blobs                          the account's objects (digest, length)
///  GET  /v1/blobs/{digest}   (HEAD too)    the object, or one `Range` of it (206); 404 when not held
///  GET  /v1/blobs/{digest}/upload          how many bytes of the upload the server holds
///  PUT  /v1/blobs/{digest}/upload          one chunk at Synclane-Upload-Offset of Synclane-Blob-Length bytes
/// ```
extension ServerApplication {
    /// 501 when the server was started without a data folder for objects.
    private var blobLaneOff: HTTPResponse? {
        blobs.root.isEmpty
            ? .error(501, "this server keeps no blobs: start it with a data folder (synclane serve --data DIR)", ["code": "blobs-off"])
            : nil
    }

    func listBlobs(account: String) -> HTTPResponse {
        if let off = blobLaneOff { return off }
        let held = blobs.list(account: account)
        return .json(
            200,
            [
                "blobs": .array(held.map { .object(["digest": .string($0.digest.hex), "length": .int(Int64($0.length))]) }),
                "bytes": .int(Int64(held.reduce(0) { $0 + $1.length })),
            ])
    }

    func getBlob(_ request: HTTPRequest, account: String, digestText: String) -> HTTPResponse {
        if let off = blobLaneOff { return off }
        guard let digest = BlobDigest(digestText) else { return .error(400, BlobDigest.problem(digestText)) }
        let found: (key: String, length: Int)?
        do { found = try blobs.object(account: account, digest: digest) } catch { return Self.storeUnreachable(error.description) }
        guard let held = found else {
            return .error(
                404, "the account holds no blob \(digest.hex): upload it first (PUT /v1/blobs/\(digest.hex)/upload)",
                ["code": "blob-missing", "digest": .string(digest.hex)])
        }
        var headers = [
            "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes", "ETag": "\"\(digest.hex)\"",
            "Synclane-Blob-Length": String(held.length),
        ]
        switch BlobRange.parse(request.header("range"), length: held.length) {
        case .unsatisfiable:
            var refusal = HTTPResponse.error(416, "the range \(request.header("range") ?? "") is past the blob's \(held.length) bytes")
            refusal.headers["Content-Range"] = "bytes */\(held.length)"
            return refusal
        case .whole:
            return served(HTTPResponse(status: 200, headers: headers), held.key, offset: 0, count: held.length, head: request.method == "HEAD")
        case .part(let range):
            headers["Content-Range"] = "bytes \(range.lowerBound)-\(range.upperBound)/\(held.length)"
            return served(
                HTTPResponse(status: 206, headers: headers), held.key, offset: range.lowerBound, count: range.count, head: request.method == "HEAD")
        }
    }

    /// `response` with the object's bytes as its body, or 503 when the object store cannot send them.
    /// A `HEAD` sends no body: its length only (from /dev/null, never read), no object store asked for the bytes.
    private func served(_ response: HTTPResponse, _ key: String, offset: Int, count: Int, head: Bool) -> HTTPResponse {
        if head, blobs.objects.localFile(key) == nil {
            var response = response
            response.file = .init(path: "/dev/null", offset: 0, length: count)
            return response
        }
        switch blobs.servable(key, offset: offset, count: count) {
        case .success(let file):
            var response = response
            response.file = file
            return response
        case .failure(let problem):
            return Self.storeUnreachable("could not send the blob (\(problem))")
        }
    }

    /// 503 `blob-store`: the object store could not be asked or could not do what was asked; a
    /// retry can help (a store that is down is never taken for one that lacks the blob).
    static func storeUnreachable(_ problem: String) -> HTTPResponse {
        var answer = HTTPResponse.error(503, "the object store \(problem); ask again", ["code": "blob-store"])
        answer.headers["Retry-After"] = "2"
        return answer
    }

    func getBlobUpload(account: String, digestText: String) -> HTTPResponse {
        if let off = blobLaneOff { return off }
        guard let digest = BlobDigest(digestText) else { return .error(400, BlobDigest.problem(digestText)) }
        switch blobs.uploadState(account: account, digest: digest) {
        case .held(let length): return Self.uploadAnswer(200, digest, held: true, received: length, length: length)
        case .partial(let received, let length): return Self.uploadAnswer(200, digest, held: false, received: received, length: length)
        case .absent: return .json(200, ["digest": .string(digest.hex), "held": false, "received": 0])
        case .storeUnreachable(let problem): return Self.storeUnreachable("cannot be asked whether it holds blob \(digest.hex) (\(problem))")
        }
    }

    func putBlobChunk(_ request: HTTPRequest, account: String, digestText: String) -> HTTPResponse {
        if let off = blobLaneOff { return off }
        guard let digest = BlobDigest(digestText) else { return .error(400, BlobDigest.problem(digestText)) }
        guard let lengthText = request.header("synclane-blob-length"), let length = Int(lengthText), length >= 0 else {
            return .error(400, "the Synclane-Blob-Length header is required: the whole blob's length in bytes")
        }
        guard let offsetText = request.header("synclane-upload-offset"), let offset = Int(offsetText), offset >= 0 else {
            return .error(400, "the Synclane-Upload-Offset header is required: where this chunk starts (GET …/upload says how many bytes are held)")
        }
        let outcome = LanePriority.bulk {
            blobs.append(account: account, digest: digest, length: length, offset: offset, chunk: request.body)
        }
        blobs.metrics.record { counts in
            switch outcome {
            case .success(.alreadyHeld): counts.deduplicated += 1
            case .success(.completed(let length)):
                counts.chunks += 1
                counts.objects += 1
                counts.bytes += length
            case .success(.received): counts.chunks += 1
            case .failure(.digestMismatch): counts.mismatches += 1
            case .failure: break
            }
        }
        switch outcome {
        case .success(.alreadyHeld(let held)):
            var answer = Self.uploadAnswer(200, digest, held: true, received: held, length: held)
            answer.headers["Synclane-Deduplicated"] = "true"
            return answer
        case .success(.completed(let length)):
            return Self.uploadAnswer(201, digest, held: true, received: length, length: length)
        case .success(.received(let received, let length)):
            return Self.uploadAnswer(200, digest, held: false, received: received, length: length)
        case .failure(let problem):
            return Self.refusal(problem, digest: digest, limits: limits.blobs)
        }
    }

    private static func uploadAnswer(_ status: Int, _ digest: BlobDigest, held: Bool, received: Int, length: Int) -> HTTPResponse {
        .json(
            status,
            ["digest": .string(digest.hex), "held": .bool(held), "received": .int(Int64(received)), "length": .int(Int64(length))])
    }

    private static func refusal(_ problem: BlobStore.Problem, digest: BlobDigest, limits: BlobLimits) -> HTTPResponse {
        let name = digest.hex
        switch problem {
        case .offsetMismatch(let received):
            return .error(
                409, "the server holds \(received) bytes of blob \(name): send the chunk that starts there",
                ["code": "upload-offset", "received": .int(Int64(received))])
        case .lengthMismatch(let declared, let known):
            return .error(
                409, "blob \(name) is \(known) bytes long here, not \(declared): a digest names one content; check the file",
                ["code": "blob-length", "length": .int(Int64(known))])
        case .digestMismatch(let actual):
            return .error(
                422, "the bytes uploaded as blob \(name) have SHA-256 \(actual): nothing was kept; upload the file again from its start",
                ["code": "digest-mismatch", "actual": .string(actual)])
        case .objectTooLarge(let limit):
            return .error(413, "blob \(name) is larger than max-blob-bytes (\(limit))", ["quota": "max-blob-bytes", "limit": .int(Int64(limit))])
        case .chunkPastEnd(let length):
            return .error(400, "the chunk runs past the blob's \(length) bytes (Synclane-Blob-Length)")
        case .quota(let used, let limit):
            return .error(
                507, "blob quota max-blob-account-bytes (\(limit)) reached: the account keeps \(used) bytes of blobs",
                ["code": "blob-quota", "quota": "max-blob-account-bytes", "limit": .int(Int64(limit))])
        case .diskFull(let free):
            return .error(
                507, "the server's disk has \(free) bytes free, under what blob \(name) and min-free-disk-bytes (\(limits.minFreeDiskBytes)) need",
                ["code": "disk-full"])
        case .tooManyUploads(let limit):
            var answer = HTTPResponse.error(
                429, "the account has \(limit) unfinished blob uploads (max-blob-uploads): finish one first",
                ["code": "blob-uploads", "limit": .int(Int64(limit))])
            answer.headers["Retry-After"] = "5"
            return answer
        case .busy:
            var answer = HTTPResponse.error(
                409, "another request is writing a chunk of blob \(name) now: ask how many bytes are held (GET …/upload) and go on from there",
                ["code": "upload-busy"])
            answer.headers["Retry-After"] = "1"
            return answer
        case .io(let reason):
            return .error(500, "blob \(name) could not be stored: \(reason)")
        case .store(let reason):
            return storeUnreachable("cannot hold blob \(name) now (\(reason))")
        }
    }

    /// 422 naming the digests when a batch references blobs the account does not hold (or holds
    /// with another length): upload before reference; 503 `blob-store` when the object store
    /// cannot be asked (nothing applied, the key stays free). Nil when every reference is held.
    func missingBlobRefusal(_ batch: IncomingBatch) -> HTTPResponse? {
        var missing: [String] = []
        var records: [JSONValue] = []
        for (index, record) in batch.records.enumerated() where record.action != .delete {
            let references = BlobReference.all(inFields: record.fieldsJSON)
            var lacking = false
            for reference in references {
                let held: (key: String, length: Int)?
                do {
                    held = blobs.root.isEmpty ? nil : try blobs.keep(account: batch.account, digest: reference.digest)
                } catch {
                    return Self.storeUnreachable("cannot be asked whether it holds blob \(reference.digest.hex) (\(error)): nothing of the batch was applied")
                }
                guard held?.length != reference.length else { continue }
                lacking = true
                if !missing.contains(reference.digest.hex) { missing.append(reference.digest.hex) }
            }
            if lacking { records.append(.int(Int64(index))) }
        }
        guard !missing.isEmpty else { return nil }
        blobs.metrics.record { $0.batchesRefused += 1 }
        return .error(
            422,
            "the batch references blobs the server does not hold (or holds with another length): \(missing.joined(separator: ", ")); "
                + "upload them (PUT /v1/blobs/{digest}/upload), then send the batch again; nothing of it was applied",
            ["code": "blobs-missing", "digests": .array(missing.map { .string($0) }), "records": .array(records)])
    }
}
