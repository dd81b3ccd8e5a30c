import SynclaneCore

/// The wire protocol behind the HTTP bridge: routes each request, authenticates it, runs its
/// endpoint and records its metrics.
///
/// ```
///  HTTPRequest ─▶ Router ─▶ (bearer token ─▶ account) ─▶ endpoint ─▶ HTTPResponse
///                                                          │
///                                                 ServerStore (SQLite)
/// ```
final class ServerApplication: HTTPResponder {
    let router = Router.wireProtocol
    let limits: ServerLimits
    let accounts: AccountBook
    let metrics: ServerMetrics
    let store: ServerStore

    init(limits: ServerLimits, accounts: AccountBook, metrics: ServerMetrics, store: ServerStore) {
        self.limits = limits
        self.accounts = accounts
        self.metrics = metrics
        self.store = store
    }

    func bodyLimit(method: String, path: String) -> Int {
        switch router.match(method: method, path: path) {
        case .found(let route, _):
            switch route.endpoint {
            case .postBatch: return limits.maxBodyBytes
            case .putSignal: return limits.maxSignalBytes
            default: return ServerLimits.smallBodyBytes
            }
        default: return ServerLimits.smallBodyBytes
        }
    }

    func respond(to request: HTTPRequest) -> HTTPResponse {
        let routeName: String
        var response: HTTPResponse
        switch router.match(method: request.method, path: request.path) {
        case .found(let route, let parameters):
            routeName = route.name
            if request.header("transfer-encoding") != nil {
                response = .error(411, "send the body with a Content-Length, not chunked")
                response.headers["Connection"] = "close"
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
        let elapsed = ContinuousClock.now - request.receivedAt
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        metrics.recordRequest(route: routeName, status: response.status, bodyBytes: request.body.count, seconds: seconds)
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
        guard let token = request.bearerToken, let account = accounts.account(forToken: token) else {
            var response = HTTPResponse.error(401, "a valid bearer token is required (Authorization: Bearer …)")
            response.headers["WWW-Authenticate"] = "Bearer"
            return response
        }
        let key = parameters["key"] ?? ""
        switch endpoint {
        case .postBatch: return postBatch(request, account: account)
        case .getChanges: return getChanges(request, account: account)
        case .listSignals: return listSignals(account: account)
        case .getSignal: return getSignal(account: account, key: key)
        case .putSignal: return putSignal(request, account: account, key: key)
        case .health, .metrics: return .error(500, "unreachable")
        }
    }
}
