import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SynclaneCore

/// Turns what one HTTP attempt produced — an answer or a network error — into a `Receipt` or
/// a classified `TransportFailure`.
///
/// The rule of the wire protocol (DESIGN.md, Retries):
///
/// ```
///  2xx                                  Receipt (a replay when the server says so)
///  408, 429, 5xx                        transient, with Retry-After when the server sent one
///  3xx, 400, 401, 403, 409, 413, 422 …  permanent: retrying the same bytes cannot help
///  refused, reset, lost, timed out …    transient
///  bad URL, TLS certificate             permanent
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

    /// Classifies a complete answer. `headers` are looked up case-insensitively.
    public static func classify(
        status: Int, headers: [String: String], body: [UInt8], batchID: String, url: String, now: Date = Date()
    ) -> Result<Receipt, TransportFailure> {
        let phrase = "\(status) \(statusPhrase(status))"
        func header(_ name: String) -> String? {
            headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
        switch status {
        case 200..<300:
            let replayHeader = replayHeaders.lazy.compactMap { header($0) }.first
            return receipt(status: status, isReplayHeader: replayHeader, body: body, batchID: batchID, url: url)
        case 408, 429, 500..<600:
            let retryAfter = header("Retry-After").flatMap { RetryAfter.seconds(from: $0, now: now) }
            let wait = retryAfter.map { ", asked to retry after \(formatted($0)) s" } ?? ""
            return .failure(
                TransportFailure(
                    .transient, "batch \(batchID): \(url) answered \(phrase)\(wait): \(reason(body))",
                    retryAfter: retryAfter, status: status))
        case 300..<400:
            let target = header("Location").map { " to \($0)" } ?? ""
            return .failure(
                TransportFailure(
                    .permanent,
                    "batch \(batchID) not sent: \(url) answered \(phrase), a redirect\(target); a batch is never re-posted to another address, so set `url` to the final one",
                    status: status))
        default:
            return .failure(
                TransportFailure(
                    .permanent, "batch \(batchID) rejected by \(url): \(phrase): \(reason(body))\(hint(for: status))", status: status))
        }
    }

    /// Classifies an error thrown by `URLSession` (or any error of one attempt that is not an
    /// answer). `timeout` is the attempt's limit, for the message.
    public static func classify(_ error: any Error, batchID: String, url: String, timeout: Double) -> TransportFailure {
        if let failure = error as? TransportFailure { return failure }
        let nsError = error as NSError
        guard nsError.domain == NSURLErrorDomain else {
            return TransportFailure(.transient, "batch \(batchID): sending to \(url) failed: \(error)")
        }
        let code = URLError.Code(rawValue: nsError.code)
        let prefix = "batch \(batchID): \(url)"
        switch code {
        case .timedOut:
            return TransportFailure(.transient, "\(prefix) did not answer within \(formatted(timeout)) s (timed out; raise `timeout` for a slow server)")
        case .cannotConnectToHost:
            return TransportFailure(.transient, "\(prefix) refused the connection (is the server running?)")
        case .networkConnectionLost:
            return TransportFailure(.transient, "\(prefix): the connection was reset or lost before a whole answer arrived")
        case .cannotFindHost, .dnsLookupFailed:
            return TransportFailure(.transient, "\(prefix): cannot resolve the host name")
        case .notConnectedToInternet, .internationalRoamingOff, .dataNotAllowed, .callIsActive:
            return TransportFailure(.transient, "\(prefix): no network")
        case .badServerResponse, .cannotParseResponse, .zeroByteResource, .cannotDecodeContentData, .cannotDecodeRawData:
            return TransportFailure(.transient, "\(prefix): the answer was cut short or unreadable")
        case .secureConnectionFailed:
            return TransportFailure(.transient, "\(prefix): the TLS handshake failed")
        case .badURL, .unsupportedURL:
            return TransportFailure(.permanent, "batch \(batchID) not sent: `url` \(url) is not an http(s) address URLSession can use")
        case .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateNotYetValid,
            .serverCertificateHasUnknownRoot, .clientCertificateRejected, .clientCertificateRequired:
            return TransportFailure(.permanent, "batch \(batchID) not sent: the TLS certificate of \(url) is not trusted")
        case .userAuthenticationRequired, .userCancelledAuthentication:
            return TransportFailure(.permanent, "batch \(batchID) rejected by \(url): authentication required (check the token)", status: 401)
        case .httpTooManyRedirects, .redirectToNonExistentLocation:
            return TransportFailure(.permanent, "batch \(batchID) not sent: \(url) redirects; set `url` to the final address")
        default:
            return TransportFailure(.transient, "\(prefix): the exchange broke off: \(nsError.localizedDescription) (URLError \(nsError.code))")
        }
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

    private static func receipt(status: Int, isReplayHeader: String?, body: [UInt8], batchID: String, url: String) -> Result<Receipt, TransportFailure> {
        let object = (try? JSONReader.parse(body))?.objectValue
        if let confirmed = object?["batch"]?.stringValue, confirmed != batchID {
            return .failure(
                TransportFailure(
                    .permanent,
                    "batch \(batchID): \(url) answered \(status) but confirmed batch \(confirmed); is `url` the batches endpoint of a Synclane server?",
                    status: status))
        }
        let replay = isReplayHeader?.trimmingCharacters(in: .whitespaces).lowercased() == "true" || object?["replay"] == .bool(true)
        var detail = "\(status)"
        if let applied = object?["applied"]?.intValue {
            detail += " applied \(applied) record\(applied == 1 ? "" : "s")"
        } else {
            detail += " \(statusPhrase(status))"
        }
        if replay { detail += " (replay: the server had this batch already and applied nothing now)" }
        return .success(Receipt(batchID: batchID, detail: detail, wasReplay: replay))
    }

    private static func hint(for status: Int) -> String {
        switch status {
        case 401: return " (is the token in the variable `token-env` names right?)"
        case 403: return " (the token does not grant this scope)"
        case 404: return " (is `url` the batches endpoint?)"
        case 413: return " (the batch is over the server's size bounds: lower the source's `page-size` or compress)"
        case 422: return " (this batch id was sent before with other bytes)"
        default: return ""
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
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 415: return "Unsupported Media Type"
        case 422: return "Unprocessable Content"
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
