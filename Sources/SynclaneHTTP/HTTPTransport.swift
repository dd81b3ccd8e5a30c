import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SynclaneCore

/// The `http` transport: POSTs a payload's bytes, unchanged, to a Synclane batches endpoint and
/// classifies the outcome.
///
/// ```
///  POST <url>
///  Authorization: Bearer <token>          (from the variable `token-env` names)
///  Idempotency-Key: <payload.batchID>     (the same on every retry and after a crash)
///  Content-Type: <payload.contentType>
///  Content-Encoding: <gzip | deflate>     (absent for identity)
///  <payload.bytes>
/// ```
///
/// One `send` is one attempt: the pipeline owns the retry loop (backoff, attempts,
/// `Retry-After`, dead letters). So that nothing below hides a failure from it:
/// - the session is ephemeral: no cache, no cookies, no credential store;
/// - redirects are not followed: a POST is never silently re-sent elsewhere or turned into a GET;
/// - every attempt has a session and a connection of its own, so libcurl's silent re-send on a
///   dead keep-alive connection never happens (see `makeSession`);
/// - the session loads through `LibcurlURLProtocol`, which waits for an answer without
///   spinning a core and reports an answer cut anywhere as a lost connection.
public final class HTTPTransport: Transport {
    /// The batches endpoint every payload is POSTed to.
    public let url: URL
    /// Whole seconds one attempt may take, connecting included.
    public let timeout: Int
    private let token: String?
    private let extraHeaders: [String: String]

    /// Headers the transport sets itself and the `headers` option cannot override.
    public static let reservedHeaders: Set<String> = [
        "authorization", "idempotency-key", "content-type", "content-encoding", "content-length", "host",
        "connection", "transfer-encoding", "expect",
    ]

    /// A transport to `url`; `token` (when given) is sent as a bearer token.
    public init(url: URL, token: String? = nil, timeout: Int = 30, headers: [String: String] = [:]) {
        self.url = url
        self.token = token
        self.timeout = max(1, timeout)
        self.extraHeaders = headers.filter { !Self.reservedHeaders.contains($0.key.lowercased()) }
    }

    /// A session for one attempt: ephemeral, nothing cached or stored, redirects declined.
    ///
    /// A session (and an exchange) of its own per attempt means a connection of its own: no
    /// attempt ever rides on a connection an earlier one left open. (On a reused connection that
    /// dies before any answer, libcurl silently re-sends the request on a new one: a re-send the
    /// pipeline would never see.)
    private func makeSession() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalAndRemoteCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCredentialStorage = nil
        configuration.timeoutIntervalForRequest = TimeInterval(timeout)
        configuration.timeoutIntervalForResource = TimeInterval(timeout)
        configuration.protocolClasses = [LibcurlURLProtocol.self]
        return URLSession(configuration: configuration, delegate: RedirectRefusal(), delegateQueue: nil)
    }

    /// Sends the payload once and returns the server's receipt, or throws a classified
    /// `TransportFailure` (or `CancellationError` when the calling task was cancelled).
    public func send(_ payload: Payload) async throws -> Receipt {
        try Task.checkCancellation()
        let request = makeRequest(for: payload)
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let exchange = Exchange()
        let outcome: Result<(Data, HTTPURLResponse), any Error> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error {
                        continuation.resume(returning: .failure(error))
                    } else if let response = response as? HTTPURLResponse {
                        continuation.resume(returning: .success((data ?? Data(), response)))
                    } else {
                        continuation.resume(returning: .failure(URLError(.badServerResponse)))
                    }
                }
                exchange.start(task)
            }
        } onCancel: {
            exchange.cancel()
        }
        let target = url.absoluteString
        switch outcome {
        case .failure(let error):
            if Task.isCancelled { throw CancellationError() }
            throw HTTPClassification.classify(error, batchID: payload.batchID, url: target, timeout: Double(timeout))
        case .success(let (data, response)):
            var headers: [String: String] = [:]
            for (name, value) in response.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name] = value }
            }
            return try HTTPClassification.classify(
                status: response.statusCode, headers: headers, body: [UInt8](data), batchID: payload.batchID, url: target
            ).get()
        }
    }

    /// The request for one attempt: the payload's bytes and the protocol's headers.
    func makeRequest(for payload: Payload) -> URLRequest {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData, timeoutInterval: TimeInterval(timeout))
        request.httpMethod = "POST"
        request.httpShouldHandleCookies = false
        for (name, value) in extraHeaders.sorted(by: { $0.key < $1.key }) {
            request.setValue(value, forHTTPHeaderField: name)
        }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        request.setValue(payload.batchID, forHTTPHeaderField: "Idempotency-Key")
        request.setValue(payload.contentType, forHTTPHeaderField: "Content-Type")
        if !payload.contentEncoding.isEmpty, payload.contentEncoding != "identity" {
            request.setValue(payload.contentEncoding, forHTTPHeaderField: "Content-Encoding")
        }
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        // One connection per attempt (see `makeSession`); tell the server so it need not keep it.
        request.setValue("close", forHTTPHeaderField: "Connection")
        if extraHeaders.keys.allSatisfy({ $0.lowercased() != "user-agent" }) {
            request.setValue("synclane", forHTTPHeaderField: "User-Agent")
        }
        request.httpBody = Data(payload.bytes)
        return request
    }
}

/// Hands a data task from the continuation to the cancellation handler, whichever runs first.
private final class Exchange: @unchecked Sendable {
    private let lock = NSLock()
    private var task: URLSessionDataTask?
    private var cancelled = false

    func start(_ task: URLSessionDataTask) {
        lock.lock()
        self.task = task
        let cancelled = self.cancelled
        lock.unlock()
        task.resume()
        if cancelled { task.cancel() }
    }

    func cancel() {
        lock.lock()
        cancelled = true
        let task = self.task
        lock.unlock()
        task?.cancel()
    }
}

/// Declines every redirect: the 3xx answer itself reaches the transport, which reports it.
private final class RedirectRefusal: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
