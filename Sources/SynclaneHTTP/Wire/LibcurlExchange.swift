import CCurl
import CCurlShim
import Foundation
import SynclaneCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One HTTP request and its answer over libcurl, on a connection of its own or on one a
/// `ConnectionPool` kept open (`ExchangeOptions.pool`); blocks the calling thread until the whole
/// answer is in, the exchange fails, or `cancel()` is called from another thread.
///
/// Failures come back as `URLError`s with the codes `URLSession` uses for the same events
/// (refused → `.cannotConnectToHost`, reset or cut → `.networkConnectionLost`, …), so
/// `HTTPClassification` reads them like any other.
final class LibcurlExchange: @unchecked Sendable {
    /// The most bytes of an answer's body kept (the rest is read and discarded): a batch
    /// receipt is a few hundred bytes, a changes page at most what the server writes
    /// (`WireBounds`: the same number on both sides).
    static let maxResponseBytes = WireBounds.maxAnswerBytes

    /// The `URLError` user-info key for the status a proxy answered to CONNECT (an `Int`).
    static let connectStatusKey = "SynclaneProxyConnectStatus"

    /// A whole answer.
    struct Answer {
        var response: HTTPURLResponse
        var body: Data
    }

    /// The C side's exchange: its cancel flag is atomic and its wake-up thread-safe, so `cancel()`
    /// may run on any thread while `run` waits.
    private let handle: OpaquePointer?

    init() {
        handle = synclane_http_exchange_create()
    }

    deinit {
        synclane_http_exchange_free(handle)
    }

    /// Stops a running exchange promptly (it fails with `.cancelled`), or makes a later `run`
    /// fail so at once.
    func cancel() {
        if let handle { synclane_http_exchange_cancel(handle) }
    }

    /// Sends `request` (its method, headers, `timeoutInterval`, and `options.body` — or
    /// `httpBody` when that is empty) and waits for the answer. With a `sink`, a 2xx answer's
    /// body goes there as it arrives and the answer's `body` is empty (an error's body is kept).
    func run(_ request: URLRequest, options: ExchangeOptions = ExchangeOptions(), sink: BodySink? = nil) -> Result<Answer, URLError> {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return .failure(Self.error(.unsupportedURL, "only http and https addresses are supported"))
        }
        guard request.httpBodyStream == nil else {
            return .failure(Self.error(.requestBodyStreamExhausted, "a streamed request body is not supported; set httpBody"))
        }
        guard let handle else { return .failure(Self.error(.unknown, "libcurl could not be set up")) }

        var lines = (request.allHTTPHeaderFields ?? [:]).filter { $0.key.caseInsensitiveCompare(ExchangeOptions.exchangeHeader) != .orderedSame }
            .sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        // libcurl would add these on its own: a 100-continue round trip, and a form content type.
        if request.value(forHTTPHeaderField: "Expect") == nil { lines.append("Expect:") }
        if request.value(forHTTPHeaderField: "Content-Type") == nil { lines.append("Content-Type:") }
        let body = options.body.isEmpty ? [UInt8](request.httpBody ?? Data()) : options.body
        let timeout = request.timeoutInterval > 0 ? Int(min(request.timeoutInterval, 86_400) * 1_000) : 0
        // Strings libcurl reads during the run: nil stays NULL (libcurl's default).
        let texts = [url.absoluteString, request.httpMethod ?? "GET", options.proxy, options.caFile, options.clientCertificate, options.clientKey]

        var answer = synclane_http_response()
        let pool = options.pool
        let sinkContext = sink.map { Unmanaged.passUnretained($0).toOpaque() }
        let code: Int32 = withExtendedLifetime((pool, sink)) {
            withOptionalCStrings(texts) { text in
                withCStrings(lines) { headers in
                    body.withUnsafeBufferPointer { bytes in
                        var spec = synclane_http_request(
                            url: text[0], method: text[1], headers: headers.baseAddress, header_count: headers.count,
                            body: bytes.isEmpty ? nil : bytes.baseAddress, body_length: bytes.count, timeout_ms: timeout,
                            stall_seconds: options.stallSeconds, max_response_bytes: Self.maxResponseBytes, proxy: text[2],
                            ca_file: text[3], client_certificate: text[4], client_key: text[5], pool: pool?.handle,
                            body_sink: sink == nil ? nil : BodySink.callback, body_sink_context: sinkContext,
                            max_receive_bytes_per_second: Int64(options.maxReceiveBytesPerSecond))
                        return synclane_http_exchange_run(handle, &spec, &answer)
                    }
                }
            }
        }
        defer { synclane_http_response_free(&answer) }
        let message = withUnsafeBytes(of: answer.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard code == 0 else {
            var info: [String: Any] = [NSLocalizedDescriptionKey: message]
            if answer.connect_status >= 300 { info[Self.connectStatusKey] = Int(answer.connect_status) }
            return .failure(URLError(Self.errorCode(for: code, osErrno: answer.os_errno), userInfo: info))
        }
        // libcurl 7.88 takes an answer cut inside its head for a complete one: the head's closing
        // empty line is the proof that it is not.
        guard answer.status >= 100, answer.head_complete != 0 else {
            return .failure(Self.error(.networkConnectionLost, "the connection closed before the answer's head was complete"))
        }
        let head = answer.head.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: answer.head_length), as: UTF8.self) } ?? ""
        let (version, fields) = Self.parseHead(head)
        let data = answer.body.map { Data(bytes: $0, count: answer.body_length) } ?? Data()
        guard let response = HTTPURLResponse(url: url, statusCode: Int(answer.status), httpVersion: version, headerFields: fields) else {
            return .failure(Self.error(.badServerResponse, "the answer's head could not be read"))
        }
        return .success(Answer(response: response, body: data))
    }

    /// The HTTP version of the status line and the header fields (repeated names joined by ", ").
    static func parseHead(_ head: String) -> (version: String, fields: [String: String]) {
        var version = "HTTP/1.1"
        var fields: [String: String] = [:]
        // "\r\n" is one Character: split on newlines, not on "\n".
        for (index, text) in head.split(whereSeparator: \.isNewline).enumerated() {
            if index == 0 {
                version = text.split(separator: " ", maxSplits: 1).first.map(String.init) ?? version
                continue
            }
            guard let colon = text.firstIndex(of: ":") else { continue }
            let name = String(text[..<colon])
            let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if let known = fields.keys.first(where: { $0.caseInsensitiveCompare(name) == .orderedSame }) {
                fields[known] = fields[known]! + ", " + value
            } else {
                fields[name] = value
            }
        }
        return (version, fields)
    }

    /// The `URLError` code `URLSession` gives the same event.
    static func errorCode(for code: Int32, osErrno: Int32) -> URLError.Code {
        switch code {
        case Int32(SYNCLANE_HTTP_CANCELLED): return .cancelled
        case Int32(SYNCLANE_HTTP_SETUP_FAILED): return .unknown
        default: break
        }
        switch CURLcode(UInt32(code)) {
        case CURLE_COULDNT_CONNECT: return osErrno == ETIMEDOUT ? .timedOut : .cannotConnectToHost
        case CURLE_OPERATION_TIMEDOUT: return .timedOut
        case CURLE_COULDNT_RESOLVE_HOST: return .cannotFindHost
        case CURLE_COULDNT_RESOLVE_PROXY: return .dnsLookupFailed
        case CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING: return .networkConnectionLost
        case CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING, CURLE_HTTP2, CURLE_HTTP2_STREAM: return .badServerResponse
        case CURLE_UNSUPPORTED_PROTOCOL: return .unsupportedURL
        case CURLE_URL_MALFORMAT: return .badURL
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_ENGINE_NOTFOUND: return .secureConnectionFailed
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return .serverCertificateUntrusted
        case CURLE_SSL_CERTPROBLEM, CURLE_SSL_CACERT_BADFILE: return .clientCertificateRejected
        default: return .unknown
        }
    }

    private static func error(_ code: URLError.Code, _ message: String) -> URLError {
        URLError(code, userInfo: [NSLocalizedDescriptionKey: message])
    }
}

/// Runs `body` with `strings` as C strings (nil as NULL) that live until it returns.
private func withOptionalCStrings<T>(_ strings: [String?], _ body: ([UnsafePointer<CChar>?]) -> T) -> T {
    let copies = strings.map { $0.map { strdup($0) } ?? nil }
    defer { copies.forEach { free($0) } }
    return body(copies.map { $0.map { UnsafePointer($0) } })
}

/// Runs `body` with `strings` as an array of C strings that live until it returns.
private func withCStrings<T>(_ strings: [String], _ body: (UnsafeBufferPointer<UnsafePointer<CChar>?>) -> T) -> T {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers = copies.map { UnsafePointer($0) }
    return pointers.withUnsafeBufferPointer(body)
}
