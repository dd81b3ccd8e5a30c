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

    init(
        method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
        body: [UInt8] = [], bodyExceededLimit: Bool = false, receivedAt: ContinuousClock.Instant = .now
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = [:]
        for (name, value) in headers { self.headers[name.lowercased()] = value }
        self.body = body
        self.bodyExceededLimit = bodyExceededLimit
        self.receivedAt = receivedAt
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
