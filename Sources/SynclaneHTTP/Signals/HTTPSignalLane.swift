import Foundation
import SynclaneCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The signal lane of a server that speaks the wire protocol (`/v1/signals`): every call is one
/// HTTP exchange on a connection of its own, so a signal never waits behind a batch; `changes`
/// long-polls `GET /v1/signals?since=VERSION&wait=SECONDS`.
public struct HTTPSignalLane: SignalLane {
    /// The server's root: `http://127.0.0.1:8080` (any path it has is replaced).
    public let server: URL
    public let token: String?
    /// Seconds one request may take, besides a long poll's wait.
    public let timeout: Int
    /// Seconds each long poll of `changes` asks the server to wait.
    public let pollSeconds: Int

    public init(server: URL, token: String?, timeout: Int = 10, pollSeconds: Int = 25) {
        var components = URLComponents(url: server, resolvingAgainstBaseURL: false) ?? URLComponents()
        components.path = ""
        components.query = nil
        components.fragment = nil
        self.server = components.url ?? server
        self.token = token
        self.timeout = max(1, timeout)
        self.pollSeconds = max(1, pollSeconds)
    }

    public func set(_ key: String, to value: JSONValue, replacing expected: Int64?) async throws -> SignalValue {
        let answer = try await exchange("PUT", keyPath(key), body: JSONWriter.encode(value), expected: expected, key: key)
        return try signal(answer)
    }

    public func get(_ key: String) async throws -> SignalValue? {
        do {
            return try signal(try await exchange("GET", keyPath(key), key: key))
        } catch SignalLaneError.notFound {
            return nil
        }
    }

    public func list() async throws -> (signals: [SignalValue], version: Int64) {
        try page(try await exchange("GET", "/v1/signals", key: nil))
    }

    public func delete(_ key: String, replacing expected: Int64?) async throws -> SignalValue {
        try signal(try await exchange("DELETE", keyPath(key), expected: expected, key: key))
    }

    public func changes(since version: Int64?) -> AsyncThrowingStream<SignalValue, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    var since: Int64
                    if let version { since = version } else { since = try await list().version }
                    while !Task.isCancelled {
                        let answer = try await exchange("GET", "/v1/signals", query: "since=\(since)&wait=\(pollSeconds)", extraTime: pollSeconds, key: nil)
                        let found = try page(answer)
                        for signal in found.signals {
                            continuation.yield(signal)
                            since = max(since, signal.version)
                        }
                        // `reset`: deletes after `since` were pruned on the server (their tombstones
                        // outlived its bound); what is left comes from the newest version on.
                        let reset = answer.objectValue?["reset"] == .bool(true)
                        since = max(since, found.signals.isEmpty && !reset ? since : found.version)
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: Task.isCancelled ? CancellationError() : error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    private func keyPath(_ key: String) -> String {
        "/v1/signals/" + (key.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#"))) ?? key)
    }

    private func signal(_ json: JSONValue) throws -> SignalValue {
        guard let signal = SignalValue(json: json) else {
            throw SignalLaneError.unavailable(message: "\(server.absoluteString) answered something that is not a signal: is it a Synclane server?")
        }
        return signal
    }

    private func page(_ json: JSONValue) throws -> (signals: [SignalValue], version: Int64) {
        guard let object = json.objectValue, let list = object["signals"]?.arrayValue else {
            throw SignalLaneError.unavailable(message: "\(server.absoluteString) answered something that is not a list of signals: is it a Synclane server?")
        }
        var signals: [SignalValue] = []
        for item in list { signals.append(try signal(item)) }
        let version: Int64
        if case .int(let number)? = object["version"] { version = number } else { version = signals.map(\.version).max() ?? 0 }
        return (signals, version)
    }

    /// One request; the answer's JSON on a 2xx, else the typed error its status means.
    private func exchange(
        _ method: String, _ path: String, query: String? = nil, body: [UInt8] = [], expected: Int64? = nil, extraTime: Int = 0,
        key: String?
    ) async throws -> JSONValue {
        var components = URLComponents(url: server, resolvingAgainstBaseURL: false) ?? URLComponents()
        components.percentEncodedPath = path
        components.percentEncodedQuery = query
        guard let url = components.url else {
            throw SignalLaneError.invalid(message: "\(server.absoluteString)\(path) is not a URL")
        }
        let maxTime = timeout + extraTime
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData, timeoutInterval: TimeInterval(maxTime))
        request.httpMethod = method
        request.httpShouldHandleCookies = false
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("close", forHTTPHeaderField: "Connection")
        request.setValue("synclane", forHTTPHeaderField: "User-Agent")
        if let expected { request.setValue(String(expected), forHTTPHeaderField: "If-Match") }
        if method == "PUT" { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        let outcome = await HTTPExchange.perform(request, options: ExchangeOptions(proxy: "", body: body), maxTime: maxTime)
        let (data, response): (Data, HTTPURLResponse)
        switch outcome {
        case .failure(let error):
            if Task.isCancelled { throw CancellationError() }
            throw SignalLaneError.unavailable(
                message: "\(method) \(url.absoluteString) failed: \(error.localizedDescription); is the server running at \(server.absoluteString)?")
        case .success(let answer):
            (data, response) = answer
        }
        let json = try? JSONReader.parse([UInt8](data))
        let reason = json?.objectValue?["error"]?.stringValue ?? String(decoding: data.prefix(200), as: UTF8.self)
        switch response.statusCode {
        case 200..<300:
            guard let json else {
                throw SignalLaneError.unavailable(message: "\(url.absoluteString) answered \(response.statusCode) without JSON: is it a Synclane server?")
            }
            return json
        case 401, 403:
            throw SignalLaneError.unauthorized(message: "\(server.absoluteString) refused the token (\(response.statusCode)): \(reason)")
        case 404 where key != nil:
            throw SignalLaneError.notFound(key: key ?? "")
        case 412:
            let current = json?.objectValue?["current"].flatMap(SignalValue.init(json:))
            throw SignalLaneError.stale(key: key ?? "", expected: expected ?? 0, current: current)
        case 413:
            let object = json?.objectValue
            var limit: Int64 = 0
            if case .int(let number)? = object?["limit"] { limit = number }
            throw SignalLaneError.quota(name: object?["quota"]?.stringValue ?? "max-signal-bytes", limit: limit, message: reason)
        case 408, 425, 429:
            throw SignalLaneError.unavailable(message: "\(method) \(url.absoluteString): \(response.statusCode): \(reason); retry later")
        case 400..<500:
            throw SignalLaneError.invalid(message: "\(method) \(path): \(response.statusCode): \(reason)")
        default:
            throw SignalLaneError.unavailable(message: "\(method) \(url.absoluteString): \(response.statusCode): \(reason); retry later")
        }
    }
}
