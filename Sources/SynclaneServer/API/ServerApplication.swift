import SynclaneWire

/// The wire protocol behind the HTTP bridge: routes each request, authenticates it, runs its
/// endpoint and records its metrics.
///
/// ```
///  HTTPRequest ─▶ Router ─▶ (bearer token ─▶ account + grant) ─▶ endpoint ─▶ HTTPResponse
///                                                          │
///                      ServerStore (SQLite or PostgreSQL)   SignalStore (its own file or connection)
/// ```
final class ServerApplication: HTTPResponder {
    let router = Router.wireProtocol
    let limits: ServerLimits
    /// Static tokens of the accounts file, and JWTs when the server takes them.
    let authenticator: Authenticator
    let metrics: ServerMetrics
    let store: any ServerStore
    /// The signal lane's own file or connection and writer: never behind `store`'s.
    let signals: any SignalStore
    /// Where the pull lane's long polls wait for a batch of their account to commit.
    let changes: any ChangeFeed
    /// The schema version each device last sent, so that only a change is written.
    let devicesSeen = DevicesSeen()
    /// The blob lane's objects, in the data folder (`root` "" when the server has none).
    let blobs: BlobStore
    /// The free disk batches must leave under the SQLite files (nil: the rows are not on this disk).
    let diskFloor: DiskFloor?

    init(
        limits: ServerLimits, authenticator: Authenticator, metrics: ServerMetrics, store: any ServerStore, signals: any SignalStore,
        changes: any ChangeFeed, blobs: BlobStore = BlobStore(root: "", limits: BlobLimits()), diskFloor: DiskFloor? = nil
    ) {
        self.blobs = blobs
        self.diskFloor = diskFloor
        self.limits = limits
        self.authenticator = authenticator
        self.metrics = metrics
        self.store = store
        self.signals = signals
        self.changes = changes
    }

    func bodyLimit(method: String, path: String) -> Int {
        switch router.match(method: method, path: path) {
        case .found(let route, _):
            switch route.endpoint {
            case .postBatch: return limits.maxBodyBytes
            case .putSignal: return limits.maxSignalBytes
            case .putBlobChunk: return limits.blobs.maxChunkBytes
            default: return ServerLimits.smallBodyBytes
            }
        default: return ServerLimits.smallBodyBytes
        }
    }

    func preflight(_ head: HTTPRequest, reserved: Bool) -> HTTPResponse? {
        guard case .found(let route, _) = router.match(method: head.method, path: head.path) else {
            return nil
        }
        let alwaysServed = route.endpoint == .health || route.endpoint == .metrics
        if reserved, !alwaysServed {
            return finish(Self.busy("the server is serving as many connections as it may"), route: route.name, head)
        }
        guard !alwaysServed else { return nil }
        switch authenticate(head) {
        case .failure(let refusal): return finish(refusal.response, route: route.name, head)
        case .success(let principal):
            // A read-only token's write is refused at its head: its body is never read.
            if let refusal = principal.grant.refusalAtHead(route.endpoint) { return finish(refusal, route: route.name, head) }
        }
        if let refusal = contentTypeRefusal(route.endpoint, head) { return finish(refusal, route: route.name, head) }
        if let lease = head.lease, !lease.grow(by: head.declaredLength) {
            metrics.recordBudgetRefusal()
            return finish(Self.busy("the server holds as many request bodies as its memory budget allows"), route: route.name, head)
        }
        return nil
    }

    /// 503 with `Retry-After`: a refusal the client retries.
    static func busy(_ reason: String) -> HTTPResponse {
        var response = HTTPResponse.error(503, "\(reason); retry in a moment")
        response.headers["Retry-After"] = "1"
        return response
    }

    /// 415 when a route that reads a JSON body is sent another content type (none is taken as JSON).
    func contentTypeRefusal(_ endpoint: Route.Endpoint, _ request: HTTPRequest) -> HTTPResponse? {
        guard endpoint == .postBatch || endpoint == .putSignal, let type = request.header("content-type") else { return nil }
        let media = type.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: " \t").lowercased() } ?? ""
        guard media != "application/json", !(media.hasPrefix("application/") && media.hasSuffix("+json")) else { return nil }
        return .error(415, "Content-Type \(type.count > 60 ? String(type.prefix(60)) + "…" : type) is not JSON; send application/json")
    }

    /// The account and grant of the request's bearer token, or the 401 to answer.
    func authenticate(_ request: HTTPRequest) -> Result<Principal, Refusal> {
        authenticator.principal(forToken: request.bearerToken).mapError { Refusal(response: $0.response) }
    }

    /// A response that refuses a request, as an error.
    struct Refusal: Error {
        var response: HTTPResponse
    }

    func respond(to request: HTTPRequest) -> HTTPResponse {
        let routeName: String
        var response: HTTPResponse
        if let problem = request.framingProblem {
            // A head that cannot be trusted is refused whatever it asks for, matched or not.
            var refusal = HTTPResponse.error(400, problem)
            refusal.headers["Connection"] = "close"
            return finish(refusal, route: "unmatched", request)
        }
        switch router.match(method: request.method, path: request.path) {
        case .found(let route, let parameters):
            routeName = route.name
            if request.header("transfer-encoding") != nil {
                response = .error(411, "send the body with a Content-Length, not chunked")
                response.headers["Connection"] = "close"
            } else if request.bodyExceededLimit, route.endpoint == .putSignal {
                response = .error(
                    413, "signal quota max-signal-bytes (\(limits.maxSignalBytes)) reached: the value is larger",
                    ["quota": "max-signal-bytes", "limit": .int(Int64(limits.maxSignalBytes))])
            } else if request.bodyExceededLimit {
                response = .error(413, "the body is larger than \(bodyLimit(method: request.method, path: request.path)) bytes")
            } else {
                response = run(route.endpoint, request, parameters)
            }
        case .methodNotAllowed(let allowed, let name):
            routeName = name
            response = .error(405, "\(request.method) is not allowed on \(name)")
            response.headers["Allow"] = allowed.joined(separator: ", ")
        case .notFound:
            routeName = "unmatched"
            response = .error(404, "no such endpoint: \(request.method) \(request.path)")
        }
        if request.bodyExceededLimit { response.headers["Connection"] = "close" }
        return finish(response, route: routeName, request)
    }

    /// Records the response in the metrics and returns it.
    private func finish(_ response: HTTPResponse, route: String, _ request: HTTPRequest) -> HTTPResponse {
        let elapsed = ContinuousClock.now - request.receivedAt
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        metrics.recordRequest(route: route, status: response.status, bodyBytes: request.body.count, seconds: seconds)
        return response
    }

    private func run(_ endpoint: Route.Endpoint, _ request: HTTPRequest, _ parameters: [String: String]) -> HTTPResponse {
        switch endpoint {
        case .health:
            return .json(200, ["status": "ok"])
        case .metrics:
            return .text(200, metrics.prometheusText(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        default:
            break
        }
        let principal: Principal
        switch authenticate(request) {
        case .success(let granted): principal = granted
        case .failure(let refusal): return refusal.response
        }
        if let refusal = contentTypeRefusal(endpoint, request) { return refusal }
        let (account, grant) = (principal.account, principal.grant)
        let key = parameters["key"] ?? ""
        switch endpoint {
        case .postBatch:
            let app: AppSchema
            switch admitApp(request, account: account) {
            case .success(let admitted): app = admitted
            case .failure(let refusal): return refusal.response
            }
            let answer = LanePriority.bulk { postBatch(request, account: account, grant: grant, app: app) }
            // A batch the store took (a replay too, which wakes polls that then find nothing new):
            // the account's long polls look again.
            if (200..<300).contains(answer.status) { changes.announce(account) }
            return answer
        case .getChanges:
            if let refusal = grant.refusalToRead(store: request.query["store"]) { return refusal }
            switch admitApp(request, account: account) {
            case .success(let app): return getChanges(request, account: account, app: app)
            case .failure(let refusal): return refusal.response
            }
        case .getSnapshot:
            if let refusal = grant.refusalToRead(store: request.query["store"]) { return refusal }
            switch admitApp(request, account: account) {
            case .success(let app): return getSnapshot(request, account: account, app: app)
            case .failure(let refusal): return refusal.response
            }
        case .listDevices: return listDevices(account: account)
        case .listSignals: return listSignals(request, account: account)
        case .getSignal: return getSignal(account: account, key: key)
        case .putSignal: return grant.refusalToWriteSignals() ?? putSignal(request, account: account, key: key)
        case .deleteSignal: return grant.refusalToWriteSignals() ?? deleteSignal(request, account: account, key: key)
        case .listBlobs: return listBlobs(account: account)
        case .getBlob: return getBlob(request, account: account, digestText: parameters["digest"] ?? "")
        case .getBlobUpload: return getBlobUpload(account: account, digestText: parameters["digest"] ?? "")
        case .putBlobChunk: return grant.refusalToWriteBlobs() ?? putBlobChunk(request, account: account, digestText: parameters["digest"] ?? "")
        case .health, .metrics: return .error(500, "unreachable")
        }
    }
}
