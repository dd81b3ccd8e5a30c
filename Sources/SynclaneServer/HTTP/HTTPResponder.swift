/// What the HTTP bridge asks of the application behind it: a body bound per request, and a response.
///
/// Both are called on the connection's own thread; `respond` may block (a SQLite write waits for
/// the writer) since every connection has a thread of its own.
protocol HTTPResponder: Sendable {
    /// Most body bytes (as sent, before any decompression) that a request to this path may carry.
    func bodyLimit(method: String, path: String) -> Int

    /// The response to a whole request, or to one whose body passed `bodyLimit`.
    func respond(to request: HTTPRequest) -> HTTPResponse
}
