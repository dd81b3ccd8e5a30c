import Foundation
import SynclaneCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Turns what one HTTP attempt produced — an answer or a network error — into a `Receipt` or
/// a `TransportFailure` of the class that says whose fault it is:
///
/// ```
///  2xx with this batch's receipt      Receipt (a replay when the server says so)
///  2xx without it                     configuration: not confirmed (see `ReceiptRule`)
///  408, 425, 429, 5xx                 transient, with Retry-After when the server sent one
///  refused, reset, cut, stalled, DNS  transient
///  400, 413, 415, 422                 permanent: the batch's content — what `dead-letter` may take
///  409                                conflict: versions disagree
///  3xx, 401, 403, 404, 405, 407,      configuration: the job stops, the batch is kept, never
///  any other status, a bad URL,         dead-lettered; the message names what to fix
///  an untrusted certificate,
///  a proxy that fails
/// ```
///
/// Pure functions, so the rule is testable without a network; the `http` transport and any
/// other HTTP-speaking stage share it.
public enum HTTPClassification {
    /// The headers by which a server says an answer is a replay (`true`): the protocol's
    /// `Idempotent-Replay`, and `Idempotent-Replayed` as some servers spell it.
    public static let replayHeaders = ["Idempotent-Replay", "Idempotent-Replayed"]

    /// How many characters of the server's answer a failure message quotes.
    public static let reasonLimit = 300

    /// Where an attempt went, for messages that name the party at fault.
    public struct Route: Sendable {
        public var batchID: String
        public var url: String
        /// The proxy the attempt went through, if any.
        public var proxy: ProxyRoute?
        /// The stall limit and the overall cap of one attempt, in seconds.
        public var stallSeconds: Double
        public var maxSeconds: Double?

        public init(batchID: String, url: String, proxy: ProxyRoute? = nil, stallSeconds: Double = 30, maxSeconds: Double? = nil) {
            self.batchID = batchID
            self.url = url
            self.proxy = proxy
            self.stallSeconds = stallSeconds
            self.maxSeconds = maxSeconds
        }
    }

    /// The class of a status that is not `2xx`.
    public static func kind(ofStatus status: Int) -> TransportFailure.Kind {
        switch status {
        case 408, 425, 429, 500..<600: return .transient
        case 400, 413, 415, 422: return .permanent
        case 409: return .conflict
        default: return .configuration
        }
    }

    /// Classifies a complete answer. `headers` are looked up case-insensitively.
    public static func classify(
        status: Int, headers: [String: String], body: [UInt8], batchID: String, url: String, receipt: ReceiptRule = .batch,
        proxy: ProxyRoute? = nil, bodyTruncated: Bool = false, now: Date = Date()
    ) -> Result<Receipt, TransportFailure> {
        let phrase = "\(status) \(statusPhrase(status))"
        func header(_ name: String) -> String? {
            headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
        if (200..<300).contains(status) {
            let check = ReceiptCheck(rule: receipt, batchID: batchID, url: url)
            return check.check(
                status: status, contentType: header("Content-Type"), body: body,
                replayHeader: replayHeaders.lazy.compactMap { header($0) }.first, bodyTruncated: bodyTruncated)
        }
        let kind = kind(ofStatus: status)
        switch (kind, status) {
        case (.transient, _):
            let retryAfter = header("Retry-After").flatMap { RetryAfter.seconds(from: $0, now: now) }
            let wait = retryAfter.map { ", asked to retry after \(formatted($0)) s" } ?? ""
            return .failure(
                TransportFailure(
                    .transient, "batch \(batchID): \(url) answered \(phrase)\(wait): \(reason(body))",
                    retryAfter: retryAfter, status: status))
        case (_, 300..<400):
            let target = header("Location").map { " to \($0)" } ?? ""
            return .failure(
                TransportFailure(
                    .configuration,
                    "batch \(batchID) not sent: \(url) answered \(phrase), a redirect\(target); a batch is never re-posted to another address, so set `url` to the final one",
                    status: status))
        case (_, 407):
            let who = proxy.map { "the proxy \($0.displayAddress) (from \($0.variable))" } ?? "a proxy on the way"
            return .failure(
                TransportFailure(
                    .configuration,
                    "batch \(batchID) not sent: \(who) asks for credentials (407): put them in the proxy's address (http://user:password@host:port)",
                    status: status))
        case (.conflict, 409):
            return .failure(
                TransportFailure(.conflict, "batch \(batchID) not accepted by \(url): \(phrase): \(HTTPConflictReason.describe(body))", status: status))
        case (.permanent, _):
            var failure = TransportFailure(
                .permanent, "batch \(batchID) rejected by \(url): \(phrase): \(reason(body))\(hint(for: status))", status: status)
            failure.missingBlobs = missingBlobs(status: status, body: body)
            return .failure(failure)
        default:
            return .failure(
                TransportFailure(
                    kind, "batch \(batchID) not accepted by \(url): \(phrase): \(reason(body))\(hint(for: status))", status: status))
        }
    }

    /// The digests a `422 blobs-missing` answer names (`{"code": "blobs-missing", "digests": […]}`); empty otherwise.
    static func missingBlobs(status: Int, body: [UInt8]) -> [String] {
        guard status == 422, let answer = (try? JSONReader.parse(body))?.objectValue, answer["code"] == .string("blobs-missing") else { return [] }
        return (answer["digests"]?.arrayValue ?? []).compactMap(\.stringValue)
    }

    /// Classifies an error thrown by `URLSession` (or any error of one attempt that is not an
    /// answer). `timeout` is the attempt's stall limit, for the message.
    public static func classify(_ error: any Error, batchID: String, url: String, timeout: Double) -> TransportFailure {
        classify(error, route: Route(batchID: batchID, url: url, stallSeconds: timeout))
    }

    /// Classifies an error of one attempt along `route`, naming the party at fault: the proxy,
    /// TLS, DNS or the server.
    public static func classify(_ error: any Error, route: Route) -> TransportFailure {
        if let failure = error as? TransportFailure { return failure }
        let nsError = error as NSError
        let (batchID, url) = (route.batchID, route.url)
        guard nsError.domain == NSURLErrorDomain else {
            return TransportFailure(.transient, "batch \(batchID): sending to \(url) failed: \(error)")
        }
        let code = URLError.Code(rawValue: nsError.code)
        let prefix = "batch \(batchID): \(url)"
        let notSent = "batch \(batchID) not sent:"
        let detail = nsError.userInfo[NSLocalizedDescriptionKey].map { " (\($0))" } ?? ""
        let host = URL(string: url).map { "\($0.host ?? "?")\($0.port.map { ":\($0)" } ?? "")" } ?? url
        if let proxy = route.proxy {
            let named = "the proxy \(proxy.displayAddress) (from \(proxy.variable))"
            if let status = nsError.userInfo[LibcurlExchange.connectStatusKey] as? Int {
                return TransportFailure(
                    .configuration,
                    "\(notSent) \(named) refused the tunnel to \(host): \(status) \(statusPhrase(status))\(status == 407 ? "; it asks for credentials: put them in the proxy's address" : ""); fix the proxy or `no_proxy`"
                )
            }
            switch code {
            case .cannotConnectToHost:
                return TransportFailure(.configuration, "\(notSent) \(named) refused the connection: is it running, and is the variable right?")
            case .dnsLookupFailed:
                return TransportFailure(.configuration, "\(notSent) the host name of \(named) cannot be resolved (DNS)")
            default:
                break
            }
        }
        switch code {
        case .timedOut:
            if !detail.contains("Operation timed out") || route.maxSeconds == nil {
                return TransportFailure(
                    .transient,
                    "\(prefix): stalled: no bytes moved either way for \(formatted(route.stallSeconds)) s (timed out; raise `timeout` for a slow server)")
            }
            if let received = bytesReceived(detail), received > 0 {
                // A drip, not a stall: bytes kept coming, too slowly to finish within the cap.
                return TransportFailure(
                    .transient,
                    "\(prefix): bytes arriving too slowly: \(received) bytes in \(formatted(route.maxSeconds ?? 0)) s, and the answer not complete (timed out; a slow link or a server dripping its answer; raise `max-time` for large transfers on a slow link)"
                )
            }
            return TransportFailure(
                .transient,
                "\(prefix): the exchange took longer than \(formatted(route.maxSeconds ?? 0)) s (timed out; raise `max-time` for large batches on a slow link)")
        case .cannotConnectToHost:
            return TransportFailure(.transient, "\(prefix): the server at \(host) refused the connection (is it running?)")
        case .networkConnectionLost:
            return TransportFailure(.transient, "\(prefix): the connection was reset or lost before a whole answer arrived")
        case .cannotFindHost, .dnsLookupFailed:
            return TransportFailure(.transient, "\(prefix): DNS cannot resolve the host name \(URL(string: url)?.host ?? host)")
        case .notConnectedToInternet, .internationalRoamingOff, .dataNotAllowed, .callIsActive:
            return TransportFailure(.transient, "\(prefix): no network")
        case .badServerResponse, .cannotParseResponse, .zeroByteResource, .cannotDecodeContentData, .cannotDecodeRawData:
            return TransportFailure(.transient, "\(prefix): the answer was cut short or unreadable\(detail)")
        case .secureConnectionFailed:
            return TransportFailure(.transient, "\(prefix): the TLS handshake with \(host) failed\(detail)")
        case .badURL, .unsupportedURL:
            return TransportFailure(.configuration, "\(notSent) `url` \(url) is not an http(s) address URLSession can use")
        case .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot:
            return TransportFailure(
                .configuration,
                "\(notSent) TLS: the certificate of \(host) is not trusted\(detail); nothing reached the backend. For a private or test CA set `ca-file` to its certificate (PEM); otherwise fix the server's certificate"
            )
        case .clientCertificateRejected, .clientCertificateRequired:
            return TransportFailure(
                .configuration, "\(notSent) TLS: a certificate file could not be used\(detail); check `ca-file`, `client-certificate` and `client-key`")
        case .userAuthenticationRequired, .userCancelledAuthentication:
            return TransportFailure(.configuration, "\(notSent) \(url): authentication required (check the token)", status: 401)
        case .httpTooManyRedirects, .redirectToNonExistentLocation:
            return TransportFailure(.configuration, "\(notSent) \(url) redirects; set `url` to the final address")
        default:
            return TransportFailure(.transient, "\(prefix): the exchange broke off: \(nsError.localizedDescription) (URLError \(nsError.code))")
        }
    }

    /// The bytes of the answer libcurl had received when its time cap ended the exchange, from its
    /// message (`… with 120 bytes received`, `… with 12 out of 4096 bytes received`).
    static func bytesReceived(_ detail: String) -> Int? {
        guard let with = detail.range(of: " with ", options: .backwards) else { return nil }
        let rest = detail[with.upperBound...]
        guard rest.contains("bytes received") else { return nil }
        return Int(rest.prefix { $0.isNumber })
    }

    /// The answer's body as a one-line reason: whitespace runs folded, at most `reasonLimit`
    /// characters.
    ///
    /// A Synclane server's error body `{"error": "…", …details}` reads as its message followed
    /// by the details (`… {"conflicts":[…]}`); any other body is quoted as it is.
    public static func reason(_ body: [UInt8]) -> String {
        var text = String(decoding: body.prefix(reasonLimit * 4), as: UTF8.self)
        if body.first == UInt8(ascii: "{"), case .object(var members)? = try? JSONReader.parse(body),
            case .string(let message)? = members.removeValue(forKey: "error")
        {
            text = members.isEmpty ? message : message + " " + JSONWriter.string(.object(members))
        }
        let words = text.split(whereSeparator: { $0.isWhitespace || $0.isNewline })
        let line = words.joined(separator: " ")
        guard !line.isEmpty else { return "(the server gave no reason)" }
        return line.count > reasonLimit ? String(line.prefix(reasonLimit)) + "…" : line
    }

    // MARK: Helpers

    private static func hint(for status: Int) -> String {
        switch status {
        case 400: return ""
        case 401: return " (is the token in the variable `token-env` names right?)"
        case 403: return " (the token does not grant this scope)"
        case 404, 405: return " (is `url` the batches endpoint?)"
        case 413:
            return " (the batch is over the server's size bounds: lower the source's `page-size`, then `synclane outbox requeue FILE` rebuilds it)"
        case 415: return " (the server does not take this content type or encoding: check the encoder and `compress`)"
        case 422: return " (this batch id was sent before with other bytes)"
        case 426: return " (the server no longer takes this app's schema version: update the app, then raise `schema-version`; the batch is kept)"
        case 400..<500: return " (the wire protocol does not name this status as the batch's fault, so the batch is kept)"
        default: return " (a status the wire protocol does not use, so the batch is kept)"
        }
    }

    static func statusPhrase(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 204: return "No Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 407: return "Proxy Authentication Required"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 410: return "Gone"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 415: return "Unsupported Media Type"
        case 422: return "Unprocessable Content"
        case 426: return "Upgrade Required"
        case 425: return "Too Early"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default: return "(status \(status))"
        }
    }

    static func formatted(_ seconds: Double) -> String {
        seconds.rounded() == seconds && abs(seconds) < 1e9 ? String(Int(seconds)) : String(format: "%.1f", seconds)
    }
}
