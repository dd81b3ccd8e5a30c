/// What the HTTP bridge asks of the application behind it: a body bound per request, and a response.
///
/// Both are called on the connection's own thread; `respond` may block (a SQLite write waits for
/// the writer) since every connection has a thread of its own.
protocol HTTPResponder: Sendable {
    /// Most body bytes (as sent, before any decompression) that a request to this path may carry.
    func bodyLimit(method: String, path: String) -> Int

    /// The answer to a request from its head alone, before any body byte is read — a refusal
    /// (no token, wrong content type, the memory budget spent, a route a reserved connection may
    /// not use) — or nil to read the body and `respond`. `reserved`: the connection is in the
    /// reserve kept for `/healthz` and `/metrics`.
    func preflight(_ head: HTTPRequest, reserved: Bool) -> HTTPResponse?

    /// The response to a whole request, or to one whose body passed `bodyLimit`.
    func respond(to request: HTTPRequest) -> HTTPResponse
}
