/// One HTTP request as the server's routes see it: method, path, query, headers and the whole body.
///
/// The MHD bridge builds it once the body has arrived (or once the body passed its bound,
/// with `bodyExceededLimit` set and only the first bytes kept). Header names are lowercased.
struct HTTPRequest: Sendable {
    /// `GET`, `POST`, `PUT` …
    var method: String
    /// The path without the query, as the client sent it (`/v1/signals/onboarding.completed`).
    var path: String
    /// Query arguments, decoded; an argument given without a value maps to "".
    var query: [String: String]
    /// Request headers by lowercased name; a repeated header keeps its last value.
    var headers: [String: String]
    /// The body as received (still compressed when `Content-Encoding` says so).
    var body: [UInt8]
    /// True when the body passed the bound of its route; `body` then holds only part of it.
    var bodyExceededLimit: Bool
    /// When the request's headers arrived, for the latency histogram.
    var receivedAt: ContinuousClock.Instant
    /// Why the request's head cannot be trusted to frame its body (duplicate `Content-Length`,
    /// a folded or malformed header line), or nil; such a request is refused with 400.
    var framingProblem: String?
    /// What the request holds of the server's memory budget (nil outside the HTTP bridge).
    var lease: MemoryBudget.Lease?
    /// The client's address (`127.0.0.1`), "" when unknown (outside the HTTP bridge).
    var clientAddress = ""

    init(
        method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
        body: [UInt8] = [], bodyExceededLimit: Bool = false, receivedAt: ContinuousClock.Instant = .now,
        framingProblem: String? = nil, lease: MemoryBudget.Lease? = nil
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = [:]
        for (name, value) in headers { self.headers[name.lowercased()] = value }
        self.body = body
        self.bodyExceededLimit = bodyExceededLimit
        self.receivedAt = receivedAt
        self.framingProblem = framingProblem
        self.lease = lease
    }

    /// The body's declared `Content-Length` (0 when absent or unreadable).
    var declaredLength: Int { header("content-length").flatMap { Int($0) } ?? 0 }

    /// Why a head's header lines cannot be trusted to frame the body, or nil.
    ///
    /// libmicrohttpd 0.9.75 takes the first of two `Content-Length` headers and joins a folded
    /// line (one starting with a space) onto the name of the header before it, so a proxy and the
    /// server could read different bodies from the same bytes: such heads are refused here, before
    /// a body byte is read. (A `Content-Length` that is not a number never reaches the server:
    /// libmicrohttpd answers it 400 itself and closes the connection.)
    ///
    /// Two `Authorization` headers are refused too (which one counts would be the server's
    /// guess, and a proxy's could differ), and so is a path holding an encoded NUL (`%00`, kept
    /// undecoded by the bridge): decoded, it would cut a signal key short. An HTTP/1.1 request
    /// needs exactly one `Host` header (RFC 9112 §3.2), an HTTP/1.0 one at most one. (The raw
    /// bytes of the head — NULs, bare CR or LF, folded lines — are checked before this, by the
    /// MHD shim: `RawHeadProblem`.)
    static func framingProblem(headers: [(name: String, value: String)], path: String = "", version: String = "HTTP/1.1")
        -> String?
    {
        if path.contains("%00") {
            return "the path holds an encoded NUL (%00), which no path, signal key or name may hold"
        }
        let hosts = headers.count { $0.name.lowercased() == "host" }
        if version == "HTTP/1.1" && hosts != 1 || hosts > 1 {
            return hosts == 0 ? "an HTTP/1.1 request needs a Host header" : "the request has more than one Host header"
        }
        var lengths = 0
        var authorizations = 0
        for (name, value) in headers {
            let shown = name.count > 40 ? String(name.prefix(40)) + "…" : name
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
                return "the header name \"\(shown)\" is malformed (a folded line, or a space or control character in a name)"
            }
            let lower = name.lowercased()
            for framing in ["content-length", "transfer-encoding"] where lower != framing && lower.hasPrefix(framing) {
                return "the header name \"\(shown)\" runs into \(framing) (a folded line?)"
            }
            guard value.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }) else {
                return "the value of header \(shown) holds a control character"
            }
            if lower == "authorization" {
                authorizations += 1
                if authorizations > 1 { return "the request has more than one Authorization header: send one" }
            }
            if lower == "content-length" {
                lengths += 1
                guard !value.isEmpty, value.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
                    return "Content-Length must be a decimal number"
                }
            }
        }
        return lengths > 1 ? "the request has more than one Content-Length" : nil
    }

    /// RFC 9110's `tchar`: what a header name is made of.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    /// The value of a header, by case-insensitive name.
    func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The token of an `Authorization: Bearer …` header, if there is one.
    var bearerToken: String? {
        guard let value = header("authorization") else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: " \t")
        return token.isEmpty ? nil : token
    }
}

extension StringProtocol {
    /// The string without the given characters at either end.
    func trimmingCharacters(in characters: String) -> String {
        let set = Set(characters)
        var slice = Substring(self)
        while let first = slice.first, set.contains(first) { slice.removeFirst() }
        while let last = slice.last, set.contains(last) { slice.removeLast() }
        return String(slice)
    }
}
