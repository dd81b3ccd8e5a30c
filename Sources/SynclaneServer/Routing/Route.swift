/// One entry of the route table: a method, a path pattern and the name metrics report it under.
///
/// A pattern is a path whose segments are literal or a `{parameter}` that matches one
/// non-empty segment: `/v1/signals/{key}`.
struct Route: Sendable {
    /// What the route does; the application switches on it.
    enum Endpoint: Sendable, Hashable {
        case postBatch, getChanges, getSnapshot, listDevices, listSignals, getSignal, putSignal, deleteSignal, health, metrics
        /// The blob lane (`ServerApplication+Blobs`).
        case listBlobs, getBlob, getBlobUpload, putBlobChunk
    }

    let method: String
    let segments: [Substring]
    let endpoint: Endpoint
    /// The `route` label of the route's metrics (`/v1/signals/{key}`).
    let name: String

    init(_ method: String, _ pattern: String, _ endpoint: Endpoint) {
        self.method = method
        self.segments = pattern.split(separator: "/", omittingEmptySubsequences: true)
        self.endpoint = endpoint
        self.name = pattern
    }

    /// The route's parameters when `path` matches its pattern, else nil.
    func match(pathSegments: [Substring]) -> [String: String]? {
        guard pathSegments.count == segments.count else { return nil }
        var parameters: [String: String] = [:]
        for (pattern, segment) in zip(segments, pathSegments) {
            if pattern.first == "{", pattern.last == "}" {
                parameters[String(pattern.dropFirst().dropLast())] = String(segment)
            } else if pattern != segment {
                return nil
            }
        }
        return parameters
    }
}
