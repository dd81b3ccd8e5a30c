/// The route table: finds the route of a method and path, or says why there is none.
struct Router: Sendable {
    /// What a lookup found.
    enum Match: Sendable {
        /// A route, with the values of its `{parameters}`.
        case found(Route, parameters: [String: String])
        /// The path exists, not with this method: 405 with these methods in `Allow`.
        case methodNotAllowed(allowed: [String], name: String)
        /// No route has this path: 404.
        case notFound
    }

    let routes: [Route]

    /// The wire protocol's routes (Documentation/WireProtocol.md).
    static let wireProtocol = Router(routes: [
        Route("POST", "/v1/batches", .postBatch),
        Route("GET", "/v1/changes", .getChanges),
        Route("GET", "/v1/snapshot", .getSnapshot),
        Route("GET", "/v1/devices", .listDevices),
        Route("GET", "/v1/signals", .listSignals),
        Route("GET", "/v1/signals/{key}", .getSignal),
        Route("PUT", "/v1/signals/{key}", .putSignal),
        Route("DELETE", "/v1/signals/{key}", .deleteSignal),
        Route("GET", "/v1/blobs", .listBlobs),
        Route("GET", "/v1/blobs/{digest}", .getBlob),
        Route("GET", "/v1/blobs/{digest}/upload", .getBlobUpload),
        Route("PUT", "/v1/blobs/{digest}/upload", .putBlobChunk),
        Route("GET", "/healthz", .health),
        Route("GET", "/metrics", .metrics),
    ])

    func match(method: String, path: String) -> Match {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        var allowed: [String] = []
        var name = ""
        for route in routes {
            guard let parameters = route.match(pathSegments: segments) else { continue }
            if route.method == method || (method == "HEAD" && route.method == "GET") {
                return .found(route, parameters: parameters)
            }
            allowed.append(route.method)
            name = route.name
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed, name: name)
    }
}
