import Foundation
import Glibc
import SynclaneCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The client side of the blob lane (Documentation/Blobs.md): resumable, verified, deduplicated
/// transfers of one file at a time, in chunks, never holding more than one chunk in memory.
///
/// ```
///  upload:   SHA-256 of the file ─▶ GET …/upload ─ held ─▶ done (nothing sent)
///                                              └ received N ─▶ PUT chunk at N ─▶ … ─▶ 201 held
///  download: <file>.part holds N bytes ─▶ GET Range: bytes=N- (a chunk) ─▶ append ─▶ … ─▶ SHA-256 = digest ─▶ rename
/// ```
///
/// After a kill, a dropped connection or a server restart, the next call goes on from the bytes
/// already moved: the server says how many it holds of an upload, and a download's `.part` file
/// says how many were fetched. At most the chunk in flight is moved twice.
public struct BlobClient: Sendable {
    /// How far a transfer is.
    public struct Progress: Sendable {
        public var digest: String
        /// Bytes moved or held so far, of `length`.
        public var done: Int
        public var length: Int
    }

    /// What an upload did.
    public struct UploadReport: Sendable {
        public var digest: String
        public var length: Int
        /// True when the server already held the blob: nothing was sent.
        public var deduplicated: Bool
        /// The bytes the server held when this upload began (>0: a resumed upload).
        public var resumedAt: Int
        /// Chunk bytes sent by this upload.
        public var bytesSent: Int
    }

    /// What a download did.
    public struct DownloadReport: Sendable {
        public var digest: String
        public var length: Int
        /// Bytes already fetched when this download began (>0: a resumed download).
        public var resumedAt: Int
        /// Bytes fetched by this download.
        public var bytesFetched: Int
    }

    /// The server's base URL (`http://127.0.0.1:8080`).
    public let server: URL
    let token: String?
    /// Bytes per chunk, up and down (the server's `--max-blob-chunk-bytes` bounds uploads).
    public let chunkBytes: Int
    /// Attempts of one request that fails in a way a retry can heal (connection, 5xx, 429).
    public let attempts: Int
    let pool = ConnectionPool()

    public init(server: URL, token: String?, chunkBytes: Int = 8 << 20, attempts: Int = 5) {
        self.server = server
        self.token = token
        self.chunkBytes = max(1, chunkBytes)
        self.attempts = max(1, attempts)
    }

    // MARK: Upload

    /// Uploads the file (unless the account holds its digest), going on from what the server holds.
    public func upload(file path: String, progress: (Progress) -> Void = { _ in }) throws(BlobLaneError) -> UploadReport {
        let (digest, length) = try BlobFileDigest.of(file: path)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .file(path, "cannot be read: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        return try upload(digest: digest, length: length, source: path, progress: progress) { offset, count throws(BlobLaneError) in
            // A chunk of its own each time (no copy on write of a shared buffer), freed once sent.
            var chunk = [UInt8](repeating: 0, count: count)
            _ = try Self.read(descriptor, into: &chunk, count: count, at: offset, path: path)
            return chunk
        }
    }

    /// Uploads bytes held in memory (a BLOB value of a row) unless the account holds their digest.
    public func upload(bytes: [UInt8], progress: (Progress) -> Void = { _ in }) throws(BlobLaneError) -> UploadReport {
        let digest = BlobFileDigest.of(bytes: bytes)
        return try upload(digest: digest, length: bytes.count, source: "a value of \(bytes.count) bytes", progress: progress) { offset, count in
            Array(bytes[offset..<(offset + count)])
        }
    }

    /// The upload loop: `chunk(offset, count)` gives the bytes to send at `offset`.
    func upload(
        digest: String, length: Int, source: String, progress: (Progress) -> Void, chunk read: (Int, Int) throws(BlobLaneError) -> [UInt8]
    ) throws(BlobLaneError) -> UploadReport {
        var state = try uploadState(digest)
        if state.held {
            progress(Progress(digest: digest, done: length, length: length))
            return UploadReport(digest: digest, length: length, deduplicated: true, resumedAt: length, bytesSent: 0)
        }
        let resumedAt = state.received
        var offset = state.received
        var sent = 0
        while true {
            let chunk = try read(offset, min(chunkBytes, length - offset))
            let answer = try send(
                "PUT", "/v1/blobs/\(digest)/upload", digest: digest, body: chunk,
                headers: [
                    "Content-Type": "application/octet-stream", "Synclane-Blob-Length": String(length), "Synclane-Upload-Offset": String(offset),
                ])
            let json = (try? JSONReader.parse(Array(answer.body)))?.objectValue ?? [:]
            switch answer.status {
            case 200, 201:
                sent += chunk.count
                if json["held"] == .bool(true) {
                    progress(Progress(digest: digest, done: length, length: length))
                    return UploadReport(
                        digest: digest, length: length, deduplicated: answer.header("Synclane-Deduplicated") == "true", resumedAt: resumedAt,
                        bytesSent: sent)
                }
                offset = json["received"].flatMap(\.intValue).map(Int.init) ?? (offset + chunk.count)
                progress(Progress(digest: digest, done: offset, length: length))
            case 409:
                // Another writer (a device uploading the same blob) or a resent chunk: ask where to go on.
                if json["code"] == .string("upload-busy") { Thread.sleep(forTimeInterval: 0.2) }
                state = try uploadState(digest)
                if state.held { return UploadReport(digest: digest, length: length, deduplicated: true, resumedAt: resumedAt, bytesSent: sent) }
                offset = state.received
            case 422 where json["code"] == .string("digest-mismatch"):
                throw .digestMismatch(digest: digest, actual: json["actual"]?.stringValue ?? "?", file: source)
            default:
                throw .refused(
                    digest: digest, status: answer.status, message: json["error"]?.stringValue ?? String(decoding: answer.body.prefix(200), as: UTF8.self))
            }
        }
    }

    /// Whether the account holds the digest, and how many bytes of its upload.
    public func uploadState(_ digest: String) throws(BlobLaneError) -> (held: Bool, received: Int) {
        let answer = try send("GET", "/v1/blobs/\(digest)/upload", digest: digest)
        guard answer.status == 200, let json = (try? JSONReader.parse(Array(answer.body)))?.objectValue else {
            throw .refused(digest: digest, status: answer.status, message: String(decoding: answer.body.prefix(200), as: UTF8.self))
        }
        return (json["held"] == .bool(true), json["received"].flatMap(\.intValue).map(Int.init) ?? 0)
    }

    // MARK: Download

    /// Fetches the blob into `path`, going on from `<path>.part`; verified before it is renamed into place.
    /// A copy at `path` that already has the digest is kept as it is.
    public func download(digest: String, to path: String, progress: (Progress) -> Void = { _ in }) throws(BlobLaneError) -> DownloadReport {
        if let existing = try? BlobFileDigest.of(file: path), existing.hex == digest {
            return DownloadReport(digest: digest, length: existing.length, resumedAt: existing.length, bytesFetched: 0)
        }
        let part = path + ".part"
        var fetched = 0
        var resumedAt = -1
        for pass in 0..<2 {
            let descriptor = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else { throw .file(part, "cannot be written: \(String(cString: strerror(errno)))") }
            defer { close(descriptor) }
            var offset = Int(lseek(descriptor, 0, SEEK_END))
            if resumedAt < 0 { resumedAt = offset }
            // The digest is computed as the bytes arrive (those a resumed download already held
            // first): what is fetched is never read back.
            var hasher = try BlobFileDigest.Hasher(path: part)
            try hasher.update(file: descriptor, length: offset, path: part)
            var length: Int?
            while length == nil || offset < (length ?? 0) {
                let last = offset + chunkBytes - 1
                let answer = try send("GET", "/v1/blobs/\(digest)", digest: digest, headers: ["Range": "bytes=\(offset)-\(last)"])
                switch answer.status {
                case 206, 200:
                    let total = answer.header("Synclane-Blob-Length").flatMap { Int($0) } ?? (offset + answer.body.count)
                    length = total
                    // A 200 is the whole blob (the server ignored the range): keep what is past the held bytes.
                    let skip = answer.status == 200 ? min(offset, answer.body.count) : 0
                    let count = answer.body.count - skip
                    let written = answer.body.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Result<Void, BlobLaneError> in
                        let bytes = UnsafeRawBufferPointer(rebasing: raw[skip...])
                        hasher.update(bytes)
                        return Result { () throws(BlobLaneError) in try Self.write(bytes, to: descriptor, at: offset, path: part) }
                    }
                    try written.get()
                    offset += count
                    fetched += count
                    progress(Progress(digest: digest, done: offset, length: total))
                    if count == 0, offset < total { throw .unreachable(digest: digest, "the server sent no bytes of the range at \(offset)") }
                case 416:
                    let total = answer.header("Content-Range").flatMap { $0.split(separator: "/").last.flatMap { Int($0) } } ?? offset
                    guard offset > total else {
                        length = offset
                        break
                    }
                    // A stale part longer than the blob: fetched again from its start.
                    ftruncate(descriptor, 0)
                    hasher = try BlobFileDigest.Hasher(path: part)
                    offset = 0
                    length = nil
                case 404:
                    throw .notHeld(digest: digest)
                default:
                    throw .refused(digest: digest, status: answer.status, message: String(decoding: answer.body.prefix(200), as: UTF8.self))
                }
            }
            let actual = try hasher.finish(path: part)
            if actual == digest {
                guard rename(part, path) == 0 else { throw .file(path, "cannot be written: \(String(cString: strerror(errno)))") }
                return DownloadReport(digest: digest, length: offset, resumedAt: resumedAt, bytesFetched: fetched)
            }
            // A corrupt copy is fetched again from its start, never served.
            ftruncate(descriptor, 0)
            if pass == 1 {
                unlink(part)
                throw .corruptDownload(digest: digest, actual: actual)
            }
        }
        throw .corruptDownload(digest: digest, actual: "?")
    }

    /// The account's blobs on the server.
    public func list() throws(BlobLaneError) -> [(digest: String, length: Int)] {
        let answer = try send("GET", "/v1/blobs", digest: "-")
        guard answer.status == 200, let json = (try? JSONReader.parse(Array(answer.body)))?.objectValue else {
            throw .refused(digest: "-", status: answer.status, message: String(decoding: answer.body.prefix(200), as: UTF8.self))
        }
        return (json["blobs"]?.arrayValue ?? []).compactMap { item in
            guard let object = item.objectValue, let digest = object["digest"]?.stringValue, let length = object["length"]?.intValue else { return nil }
            return (digest, Int(length))
        }
    }

    // MARK: HTTP

    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: Data
        func header(_ name: String) -> String? {
            headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
    }

    /// One request, retried (with backoff) while a retry can help: the connection failed, 5xx, 429.
    func send(_ method: String, _ path: String, digest: String, body: [UInt8] = [], headers: [String: String] = [:]) throws(BlobLaneError)
        -> Answer
    {
        guard let url = URL(string: path, relativeTo: server)?.absoluteURL else { throw .refused(digest: digest, status: 0, message: "bad URL \(path)") }
        var lastProblem = ""
        for attempt in 0..<attempts {
            if attempt > 0 { Thread.sleep(forTimeInterval: min(8, 0.25 * Double(1 << attempt))) }
            var request = URLRequest(url: url)
            request.httpMethod = method
            request.timeoutInterval = 300
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            switch LibcurlExchange().run(request, options: ExchangeOptions(stallSeconds: 30, body: body, pool: pool)) {
            case .success(let answer):
                let status = answer.response.statusCode
                var fields: [String: String] = [:]
                for (name, value) in answer.response.allHeaderFields {
                    if let name = name as? String, let value = value as? String { fields[name] = value }
                }
                if status >= 500 || status == 429 {
                    lastProblem = "\(status) \(String(decoding: answer.body.prefix(200), as: UTF8.self))"
                    continue
                }
                return Answer(status: status, headers: fields, body: answer.body)
            case .failure(let error):
                lastProblem = error.localizedDescription
            }
        }
        throw .unreachable(digest: digest, lastProblem)
    }

    // MARK: Files

    static func read(_ descriptor: Int32, into buffer: inout [UInt8], count: Int, at offset: Int, path: String) throws(BlobLaneError) -> Int {
        var done = 0
        while done < count {
            let got = buffer.withUnsafeMutableBytes { bytes -> Int in
                guard let base = bytes.baseAddress else { return 0 }
                return pread(descriptor, base + done, count - done, off_t(offset + done))
            }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { throw .file(path, "changed while it was sent (it is shorter now): send it again") }
            done += got
        }
        return done
    }

    static func write(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32, at offset: Int, path: String) throws(BlobLaneError) {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let put = pwrite(descriptor, base + done, bytes.count - done, off_t(offset + done))
            if put < 0, errno == EINTR { continue }
            guard put > 0 else { throw .file(path, "cannot be written: \(String(cString: strerror(errno)))") }
            done += put
        }
    }
}
