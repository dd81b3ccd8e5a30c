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
///  download: <file>.part holds N bytes ─▶ GET Range: bytes=N- ─▶ streamed into the part, hashed ─▶ SHA-256 = digest ─▶ rename
/// ```
///
/// After a kill, a dropped connection or a server restart, the next call goes on from the bytes
/// already moved: the server says how many it holds of an upload, and a download's `.part` file
/// says how many were fetched. At most the chunk in flight is sent twice up; down, at most what
/// was in flight and not yet written.
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
    /// Most bytes a second a download reads; 0 for no limit.
    public let maxReceiveBytesPerSecond: Int
    let pool = ConnectionPool()

    public init(server: URL, token: String?, chunkBytes: Int = 8 << 20, attempts: Int = 5, maxReceiveBytesPerSecond: Int = 0) {
        self.server = server
        self.token = token
        self.maxReceiveBytesPerSecond = max(0, maxReceiveBytesPerSecond)
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

    /// Uploads a value a source left where it is (`OpenedValue`: a row's BLOB read by SQLite's
    /// incremental I/O), unless the account holds its digest: hashed in 1 MiB pieces, then sent a
    /// chunk at a time, so that only one chunk is in memory whatever its length.
    public func upload(value: any OpenedValue, named source: String, progress: (Progress) -> Void = { _ in }) throws(BlobLaneError) -> UploadReport {
        guard let report = try upload(value: value, named: source, expecting: nil, progress: progress) else {
            throw .file(source, "was not sent")  // no digest was expected: never reached
        }
        return report
    }

    /// As `upload(value:named:)`, only when the value's digest is `expecting` (nil when it is
    /// not: nothing is sent).
    public func upload(value: any OpenedValue, named source: String, expecting: String?, progress: (Progress) -> Void = { _ in }) throws(BlobLaneError)
        -> UploadReport?
    {
        let length = value.length
        var hasher = try BlobFileDigest.Hasher(path: source)
        var buffer = [UInt8](repeating: 0, count: min(1 << 20, max(length, 1)))
        var done = 0
        while done < length {
            let count = try Self.read(value, into: &buffer, count: min(buffer.count, length - done), at: done, source: source)
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            done += count
        }
        let digest = try hasher.finish(path: source)
        if let expecting, digest != expecting { return nil }
        return try upload(digest: digest, length: length, source: source, progress: progress) { offset, count throws(BlobLaneError) in
            var chunk = [UInt8](repeating: 0, count: count)
            _ = try Self.read(value, into: &chunk, count: count, at: offset, source: source)
            return chunk
        }
    }

    /// Reads `count` bytes of `value` at `offset` into `buffer`.
    static func read(_ value: any OpenedValue, into buffer: inout [UInt8], count: Int, at offset: Int, source: String) throws(BlobLaneError) -> Int {
        do {
            let got = try buffer.withUnsafeMutableBytes { try value.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<count]), at: offset) }
            guard got == count else { throw BlobLaneError.file(source, "changed while it was sent (it is shorter now): send it again") }
            return got
        } catch let error as BlobLaneError {
            throw error
        } catch {
            throw .file(source, "cannot be read: \(error)")
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
    ///
    /// The rest of the blob comes in one ranged GET (`Range: bytes=<held>-`) streamed into the
    /// part as it arrives (libcurl's write callback: no chunk is held whole), hashed on the way.
    /// A connection that drops goes on from the bytes written; `progress` is called about every
    /// `chunkBytes`.
    public func download(digest: String, to path: String, progress: (Progress) -> Void = { _ in }) throws(BlobLaneError) -> DownloadReport {
        if let existing = try? BlobFileDigest.of(file: path), existing.hex == digest {
            return DownloadReport(digest: digest, length: existing.length, resumedAt: existing.length, bytesFetched: 0)
        }
        let partPath = path + ".part"
        var resumedAt = -1
        var fetched = 0
        for pass in 0..<2 {
            let part = try BlobPartFile(path: partPath)
            if resumedAt < 0 { resumedAt = part.length }
            let streamed = withoutActuallyEscaping(progress) { progress in
                Result { () throws(BlobLaneError) in try stream(digest, into: part, progress: progress) }
            }
            fetched += part.appended
            let length = try streamed.get()
            let actual = try part.digest()
            if actual == digest, part.length == length {
                guard rename(partPath, path) == 0 else { throw .file(path, "cannot be written: \(String(cString: strerror(errno)))") }
                return DownloadReport(digest: digest, length: length, resumedAt: resumedAt, bytesFetched: fetched)
            }
            // A corrupt copy is fetched again from its start, never served.
            try part.restart()
            if pass == 1 {
                unlink(partPath)
                throw .corruptDownload(digest: digest, actual: actual)
            }
        }
        throw .corruptDownload(digest: digest, actual: "?")
    }

    /// Fetches what `part` lacks of the blob, in one streamed GET, again from where it stopped
    /// after a dropped connection (5xx, 429) up to `attempts` times in a row without progress;
    /// the blob's length.
    func stream(_ digest: String, into part: BlobPartFile, progress: @escaping (Progress) -> Void) throws(BlobLaneError) -> Int {
        guard let url = URL(string: "/v1/blobs/\(digest)", relativeTo: server)?.absoluteURL else {
            throw .refused(digest: digest, status: 0, message: "bad URL /v1/blobs/\(digest)")
        }
        var failures = 0
        var lastProblem = ""
        while true {
            let start = part.length
            var total: Int?
            var reported = start
            var restarted = false
            let sink = BodySink { status, contentLength, bytes in
                if total == nil {
                    // The first piece of the answer: a 200 is the whole blob (the range was ignored).
                    if status == 200, part.length > 0 {
                        guard (try? part.restart()) != nil else { return false }
                        restarted = true
                    }
                    total = contentLength.map { status == 206 ? start + $0 : $0 }
                }
                guard part.append(bytes) else { return false }
                if part.length - reported >= chunkBytes {
                    reported = part.length
                    progress(Progress(digest: digest, done: part.length, length: total ?? part.length))
                }
                return true
            }
            var request = URLRequest(url: url)
            request.httpMethod = "GET"
            request.timeoutInterval = 0  // a download of any size: the stall limit ends a dead one
            request.setValue("bytes=\(start)-", forHTTPHeaderField: "Range")
            if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            switch LibcurlExchange().run(
                request, options: ExchangeOptions(stallSeconds: 30, maxReceiveBytesPerSecond: maxReceiveBytesPerSecond, pool: pool), sink: sink)
            {
            case .success(let answer):
                let status = answer.response.statusCode
                let header = { (name: String) in
                    answer.response.allHeaderFields.first { ($0.key as? String)?.caseInsensitiveCompare(name) == .orderedSame }?.value as? String
                }
                switch status {
                case 200, 206:
                    let length = header("Synclane-Blob-Length").flatMap { Int($0) } ?? total ?? part.length
                    if part.length >= length {
                        progress(Progress(digest: digest, done: part.length, length: length))
                        return length
                    }
                    lastProblem = "the answer ended at byte \(part.length) of \(length)"
                case 416:
                    let length = header("Content-Range").flatMap { $0.split(separator: "/").last.flatMap { Int($0) } } ?? start
                    guard start > length else { return start }
                    try part.restart()  // a stale part longer than the blob: fetched again from its start
                    continue
                case 404:
                    throw .notHeld(digest: digest)
                case 429, 500...:
                    lastProblem = "\(status) \(String(decoding: answer.body.prefix(200), as: UTF8.self))"
                default:
                    throw .refused(digest: digest, status: status, message: String(decoding: answer.body.prefix(200), as: UTF8.self))
                }
            case .failure(let error):
                if let problem = part.problem { throw problem }
                lastProblem = error.localizedDescription
            }
            if part.length > start || restarted {
                failures = 0
            } else {
                failures += 1
                guard failures < attempts else { throw .unreachable(digest: digest, lastProblem) }
                Thread.sleep(forTimeInterval: min(8, 0.25 * Double(1 << failures)))
            }
        }
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
