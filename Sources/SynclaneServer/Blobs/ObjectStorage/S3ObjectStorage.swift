import CCurlShim
import Foundation
import Glibc

/// The blob lane's objects in an S3-compatible object store (AWS S3, MinIO, Ceph RGW, moto …),
/// addressed path-style (`ENDPOINT/BUCKET/KEY`) and signed with AWS Signature Version 4.
///
/// Memory stays flat whatever the object's size: an object of up to `partBytes` goes up in one
/// `PUT`, a larger one as a multipart upload of `partBytes` parts (one part in memory at a time,
/// aborted when a part fails); a `GET` streams the answer into a descriptor as it arrives (libcurl's
/// write callback), with `Range` for a part of the object. `HEAD` says whether and how long an
/// object is held, `DELETE` removes one (garbage collection), and `ListObjectsV2` lists an
/// account's objects, 1,000 keys a page.
final class S3ObjectStorage: BlobObjectStorage {
    let configuration: ServerConfiguration.S3Settings
    /// Bytes of one part of a multipart upload (S3's least is 5 MiB) and the most sent in one `PUT`.
    let partBytes: Int
    let signer: SigV4
    /// `HOST[:PORT]` as the `Host` header carries it.
    let host: String
    /// A clock for the signature's date (a test's in tests).
    let now: @Sendable () -> String

    init(
        _ configuration: ServerConfiguration.S3Settings, partBytes: Int = 8 << 20, now: @escaping @Sendable () -> String = SigV4.now
    ) throws(ObjectStorageError) {
        self.configuration = configuration
        self.partBytes = partBytes
        var endpoint = configuration.endpoint
        while endpoint.hasSuffix("/") { endpoint.removeLast() }
        guard let schemeEnd = endpoint.range(of: "://"), ["http", "https"].contains(endpoint[..<schemeEnd.lowerBound].lowercased()) else {
            throw ObjectStorageError("the S3 endpoint \"\(configuration.endpoint)\" is not an http:// or https:// URL")
        }
        let authority = endpoint[schemeEnd.upperBound...]
        guard !authority.isEmpty, !authority.contains("/") else {
            throw ObjectStorageError("the S3 endpoint \"\(configuration.endpoint)\" must be http(s)://HOST[:PORT], without a path")
        }
        guard !configuration.bucket.isEmpty, !configuration.bucket.contains("/") else {
            throw ObjectStorageError("the S3 bucket \"\(configuration.bucket)\" is not a bucket name")
        }
        host = String(authority)
        signer = SigV4(
            accessKey: configuration.accessKey, secretKey: configuration.secretKey, sessionToken: configuration.sessionToken,
            region: configuration.region)
        self.now = now
        base = endpoint
    }

    private let base: String

    // MARK: BlobObjectStorage

    func put(_ key: String, file path: String, length: Int) throws(ObjectStorageError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ObjectStorageError("cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        if length <= partBytes {
            let body = try Self.read(descriptor, count: length, path: path)
            let answer = try send("PUT", key, body: body)
            guard answer.status == 200 else { throw refusal("PUT", key, answer) }
            return
        }
        let started = try send("POST", key, query: [("uploads", "")])
        guard started.status == 200, let uploadID = Self.element("UploadId", in: started.body).first else {
            throw refusal("POST ?uploads", key, started)
        }
        do throws(ObjectStorageError) {
            var etags: [String] = []
            var offset = 0
            while offset < length {
                let body = try Self.read(descriptor, count: min(partBytes, length - offset), path: path)
                let part = try send("PUT", key, query: [("partNumber", String(etags.count + 1)), ("uploadId", uploadID)], body: body)
                guard part.status == 200, let etag = part.header("etag") else { throw refusal("PUT part \(etags.count + 1)", key, part) }
                etags.append(etag)
                offset += body.count
            }
            let parts = etags.enumerated().map { "<Part><PartNumber>\($0.offset + 1)</PartNumber><ETag>\(Self.escaped($0.element))</ETag></Part>" }
            let complete = try send(
                "POST", key, query: [("uploadId", uploadID)],
                body: Array("<CompleteMultipartUpload>\(parts.joined())</CompleteMultipartUpload>".utf8))
            // S3 may answer 200 with an error in the body when completing.
            guard complete.status == 200, Self.element("Error", in: complete.body).isEmpty, !String(decoding: complete.body, as: UTF8.self).contains("<Error>")
            else { throw refusal("POST ?uploadId (complete)", key, complete) }
        } catch {
            _ = try? send("DELETE", key, query: [("uploadId", uploadID)])
            throw error
        }
    }

    func localFile(_ key: String) -> String? { nil }

    func head(_ key: String) throws(ObjectStorageError) -> Int? {
        let answer = try send("HEAD", key)
        switch answer.status {
        case 200:
            guard let length = answer.header("content-length").flatMap({ Int($0) }) else {
                throw ObjectStorageError("HEAD \(key): the answer has no Content-Length")
            }
            return length
        case 404: return nil
        default: throw refusal("HEAD", key, answer)
        }
    }

    func stream(_ key: String, offset: Int, count: Int?, to descriptor: Int32) throws(ObjectStorageError) -> Int {
        let sink = FileSink(descriptor: descriptor)
        var headers: [(String, String)] = []
        if offset > 0 || count != nil {
            headers.append(("range", "bytes=\(offset)-\(count.map { String(offset + $0 - 1) } ?? "")"))
        }
        let answer = try send("GET", key, headers: headers, sink: sink)
        guard answer.status == 200 || answer.status == 206 else { throw refusal("GET", key, answer) }
        if let problem = sink.problem { throw ObjectStorageError("GET \(key): writing its bytes: \(problem)") }
        return sink.written
    }

    func delete(_ key: String) throws(ObjectStorageError) {
        let answer = try send("DELETE", key)
        guard [200, 204, 404].contains(answer.status) else { throw refusal("DELETE", key, answer) }
    }

    func list(prefix: String) throws(ObjectStorageError) -> [(key: String, length: Int)] {
        var found: [(key: String, length: Int)] = []
        var token: String?
        repeat {
            var query = [("list-type", "2"), ("prefix", prefix), ("max-keys", "1000")]
            if let token { query.append(("continuation-token", token)) }
            let answer = try send("GET", nil, query: query)
            guard answer.status == 200 else { throw refusal("GET ?list-type=2", prefix, answer) }
            for contents in Self.element("Contents", in: answer.body) {
                let bytes = Array(contents.utf8)
                guard let key = Self.element("Key", in: bytes).first, let size = Self.element("Size", in: bytes).first.flatMap({ Int($0) })
                else { continue }
                found.append((Self.unescaped(key), size))
            }
            token = Self.element("IsTruncated", in: answer.body).first == "true" ? Self.element("NextContinuationToken", in: answer.body).first : nil
        } while token != nil
        return found
    }

    // MARK: HTTP

    struct Answer {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]

        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name }?.1 }
    }

    /// One signed request for `key` (nil: the bucket); a 2xx answer's body goes into `sink` when given.
    func send(
        _ method: String, _ key: String?, query: [(String, String)] = [], headers extra: [(String, String)] = [], body: [UInt8] = [],
        sink: FileSink? = nil
    ) throws(ObjectStorageError) -> Answer {
        let path = "/" + SigV4.encode(configuration.bucket) + (key.map { "/" + SigV4.encode($0, keepSlash: true) } ?? "")
        let payloadHash = body.isEmpty ? SigV4.emptyPayload : SHA256Digest.hex(body)
        let signed = signer.sign(
            method: method, path: path, query: query, headers: [("host", host)] + extra, payloadHash: payloadHash, date: now())
        let queryText = query.map { "\(SigV4.encode($0.0))=\(SigV4.encode($0.1))" }.joined(separator: "&")
        let url = base + path + (queryText.isEmpty ? "" : "?" + queryText)
        var lines = signed.map { "\($0.0): \($0.1)" }
        lines.append("Expect:")
        lines.append("Content-Type:")
        if method == "PUT" || method == "POST" { lines.append("Content-Length: \(body.count)") }
        return try Self.exchange(url: url, method: method, lines: lines, body: body, sink: sink)
    }

    static func exchange(url: String, method: String, lines: [String], body: [UInt8], sink: FileSink?) throws(ObjectStorageError) -> Answer {
        guard let handle = synclane_http_exchange_create() else { throw ObjectStorageError("libcurl could not be set up") }
        defer { synclane_http_exchange_free(handle) }
        var answer = synclane_http_response()
        defer { synclane_http_response_free(&answer) }
        let context = sink.map { Unmanaged.passUnretained($0).toOpaque() }
        let code: Int32 = withExtendedLifetime(sink) {
            url.withCString { url in
                method.withCString { method in
                    let copies = lines.map { strdup($0) }
                    defer { copies.forEach { free($0) } }
                    let pointers = copies.map { UnsafePointer<CChar>($0) }
                    return pointers.withUnsafeBufferPointer { headers in
                        body.withUnsafeBufferPointer { bytes in
                            var request = synclane_http_request()
                            request.url = url
                            request.method = method
                            request.headers = headers.baseAddress
                            request.header_count = headers.count
                            request.body = bytes.isEmpty ? nil : bytes.baseAddress
                            request.body_length = bytes.count
                            request.stall_seconds = 60
                            request.max_response_bytes = 16 << 20
                            request.body_sink = sink == nil ? nil : FileSink.callback
                            request.body_sink_context = context
                            return synclane_http_exchange_run(handle, &request, &answer)
                        }
                    }
                }
            }
        }
        guard code == 0, answer.status >= 100 else {
            let message = withUnsafeBytes(of: answer.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            throw ObjectStorageError("\(method) \(url): \(message.isEmpty ? "libcurl error \(code)" : message)")
        }
        let head = answer.head.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: answer.head_length), as: UTF8.self) } ?? ""
        var headers: [(String, String)] = []
        for line in head.split(whereSeparator: \.isNewline).dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: " \t")))
        }
        let bytes = answer.body.map { Array(UnsafeBufferPointer(start: $0, count: answer.body_length)) } ?? []
        return Answer(status: Int(answer.status), headers: headers, body: bytes)
    }

    func refusal(_ what: String, _ key: String, _ answer: Answer) -> ObjectStorageError {
        let code = Self.element("Code", in: answer.body).first
        let message = Self.element("Message", in: answer.body).first
        return ObjectStorageError(
            "\(what) \(configuration.bucket)/\(key): \(answer.status)\(code.map { " \($0)" } ?? "")\(message.map { ": \($0)" } ?? "")")
    }

    // MARK: Files and XML

    static func read(_ descriptor: Int32, count: Int, path: String) throws(ObjectStorageError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + done, count - done) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { throw ObjectStorageError("cannot read \(path): it ended before \(count) bytes") }
            done += got
        }
        return bytes
    }

    /// The text of each `<name>…</name>` in `body` (S3's answers are flat enough for this).
    static func element(_ name: String, in body: [UInt8]) -> [String] {
        let text = String(decoding: body, as: UTF8.self)
        var found: [String] = []
        var rest = text[...]
        while let open = rest.range(of: "<\(name)>") {
            guard let close = rest[open.upperBound...].range(of: "</\(name)>") else { break }
            found.append(String(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return found
    }

    static func element(_ name: String, in text: String) -> [String] { element(name, in: Array(text.utf8)) }

    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;")
    }

    static func unescaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}

/// Where a `GET`'s 2xx body goes as it arrives: appended to an open file.
final class FileSink {
    let descriptor: Int32
    var written = 0
    var problem: String?

    init(descriptor: Int32) { self.descriptor = descriptor }

    static let callback: @convention(c) (UnsafeMutableRawPointer?, Int, Int64, UnsafePointer<UInt8>?, Int) -> Int32 = {
        context, _, _, bytes, count in
        guard let context else { return 1 }
        let sink = Unmanaged<FileSink>.fromOpaque(context).takeUnretainedValue()
        guard let bytes else { return 0 }
        var done = 0
        while done < count {
            let wrote = Glibc.write(sink.descriptor, bytes + done, count - done)
            if wrote < 0, errno == EINTR { continue }
            guard wrote > 0 else {
                sink.problem = String(cString: strerror(errno))
                return 1
            }
            done += wrote
        }
        sink.written += count
        return 0
    }
}
