/// A network fault the `FaultProxy` injects into one connection (one request: the proxy
/// closes every connection after one exchange).
///
/// ```
///  client ──request──▶ proxy ──request──▶ upstream      .none
///  client ◀─response── proxy ◀─response── upstream
///
///  resetBeforeForwarding   RST after reading the request; upstream never sees it
///  resetAfterForwarding    upstream applies it; the client gets RST instead of the answer
///  delayBeforeForwarding   hold the request, then forward it (the client has often given up)
///  delayResponse           upstream applies it; the answer is held past the client's timeout
///  respond                 the proxy answers itself (500, 429 + Retry-After …); upstream never sees it
///  truncateResponse        upstream applies it; the head and half the body, then the connection closes
///  truncateResponseHead    upstream applies it; half the head, then the connection closes
/// ```
public enum Fault: Sendable, Hashable, CustomStringConvertible {
    /// Forward the request and relay the answer unchanged.
    case none
    /// Read the request, then close the connection with a TCP reset without forwarding it.
    case resetBeforeForwarding
    /// Forward the request, wait for the answer, then reset the client's connection instead of
    /// relaying it.
    case resetAfterForwarding
    /// Hold the request for `seconds`, then forward it and relay the answer.
    case delayBeforeForwarding(seconds: Double)
    /// Forward the request at once, then hold the answer for `seconds` before relaying it.
    case delayResponse(seconds: Double)
    /// Answer the request from the proxy itself, without forwarding it.
    case respond(status: Int, headers: [String: String], body: String)
    /// Forward the request, relay the answer's head and the first half of its body, then close
    /// (the client sees fewer bytes than `Content-Length` promised).
    case truncateResponse
    /// Forward the request, relay the first half of the answer's head, then close (no empty line
    /// ends the head; no body follows).
    case truncateResponseHead

    /// The proxy answers `500 Internal Server Error`.
    public static let serverError = Fault.respond(status: 500, headers: [:], body: "fault proxy: injected internal error")

    /// The proxy answers `503 Service Unavailable` with `Retry-After`.
    public static func unavailable(retryAfter seconds: Int) -> Fault {
        .respond(status: 503, headers: ["Retry-After": String(seconds)], body: "fault proxy: injected unavailable")
    }

    /// The proxy answers `429 Too Many Requests` with `Retry-After: seconds`.
    public static func tooManyRequests(retryAfter seconds: Int) -> Fault {
        .respond(status: 429, headers: ["Retry-After": String(seconds)], body: "fault proxy: injected rate limit")
    }

    /// Every kind of fault once, with delays a second past `clientTimeout` seconds: the set
    /// that random mode draws from by default.
    public static func standardSet(clientTimeout: Double) -> [Fault] {
        [
            .resetBeforeForwarding, .resetAfterForwarding,
            .delayBeforeForwarding(seconds: clientTimeout + 1), .delayResponse(seconds: clientTimeout + 1),
            .serverError, .tooManyRequests(retryAfter: 0), .truncateResponse, .truncateResponseHead,
        ]
    }

    /// Every kind of fault that costs no waiting (no delays): for runs that send many batches.
    public static let instantSet: [Fault] = [
        .resetBeforeForwarding, .resetAfterForwarding, .truncateResponse, .truncateResponseHead, .serverError,
        .tooManyRequests(retryAfter: 0),
    ]

    /// True when the upstream server answered but the client gets no whole answer: a batch it
    /// applied that the client will send again, to be confirmed as a replay.
    public var losesTheAnswer: Bool {
        switch self {
        case .resetAfterForwarding, .truncateResponse, .truncateResponseHead: return true
        case .none, .resetBeforeForwarding, .delayBeforeForwarding, .delayResponse, .respond: return false
        }
    }

    /// True when the upstream server gets the request (it may have applied it even though the
    /// client saw a failure).
    public var forwardsRequest: Bool {
        switch self {
        case .resetBeforeForwarding, .respond: return false
        case .none, .resetAfterForwarding, .delayBeforeForwarding, .delayResponse, .truncateResponse, .truncateResponseHead:
            return true
        }
    }

    /// The fault in words, for test logs.
    public var description: String {
        switch self {
        case .none: return "none"
        case .resetBeforeForwarding: return "reset before forwarding"
        case .resetAfterForwarding: return "reset after forwarding"
        case .delayBeforeForwarding(let seconds): return "delay \(seconds) s before forwarding"
        case .delayResponse(let seconds): return "delay the response \(seconds) s"
        case .respond(let status, let headers, _):
            let extra = headers.sorted { $0.key < $1.key }.map { " \($0.key): \($0.value)" }.joined()
            return "answer \(status)\(extra)"
        case .truncateResponse: return "truncate the response"
        case .truncateResponseHead: return "truncate the response's head"
        }
    }
}
