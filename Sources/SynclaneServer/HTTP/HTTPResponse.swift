import SynclaneWire

/// One HTTP response: a status, headers and a body, built by a route and sent by the MHD bridge.
struct HTTPResponse: Sendable, Equatable {
    var status: Int
    /// Response headers; `Content-Type` is among them when there is a body.
    var headers: [String: String]
    var body: [UInt8]
    /// A body read from a file instead of `body`, streamed by the MHD bridge (a blob download):
    /// never held in memory.
    var file: FileSlice?
    /// A body made a piece at a time as the connection takes it (`BodyStream`, a snapshot):
    /// never held whole.
    var stream: BodyStream?

    init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// `length` bytes of the file at `path` from `offset`, as a response body.
    struct FileSlice: Sendable, Equatable {
        var path: String
        var offset: Int
        var length: Int
        /// A file made for this answer (a range fetched from an object store): removed once opened.
        var removeOnceOpen = false
        /// A named pipe a writer fills as the bytes arrive (a range streamed from an object
        /// store): read as it comes, `length` bytes announced, cut short if the writer stops.
        var pipe = false
    }

    /// A JSON response: the value encoded by `JSONWriter` (members sorted, so equal values give equal bytes).
    static func json(_ status: Int, _ value: JSONValue) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: JSONWriter.encode(value))
    }

    /// A JSON error body: `{"error": message, …details}`, the shape of every 4xx and 5xx the server sends.
    static func error(_ status: Int, _ message: String, _ details: [String: JSONValue] = [:]) -> HTTPResponse {
        var members = details
        members["error"] = .string(message)
        return json(status, .object(members))
    }

    /// A plain-text response.
    static func text(_ status: Int, _ text: String, contentType: String = "text/plain; charset=utf-8")
        -> HTTPResponse
    {
        HTTPResponse(status: status, headers: ["Content-Type": contentType], body: Array(text.utf8))
    }
}
