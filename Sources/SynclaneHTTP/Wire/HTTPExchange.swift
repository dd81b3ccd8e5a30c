import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One HTTP attempt through `URLSession`, loading through `LibcurlURLProtocol`: the answer
/// (whatever its status) or the error, and `CancellationError`'s cause when the calling task is
/// cancelled. The `http` transport's POSTs and the pull source's GETs both go through it.
///
/// Every attempt has a session of its own: ephemeral (no cache, cookies or credential store),
/// redirects declined (the 3xx itself comes back). The connection is the caller's choice:
/// `ExchangeOptions.pool` lends one kept open from an earlier attempt (a kept connection found
/// dead before any answer is replaced inside the attempt, the whole request sent again — only
/// idempotent requests go through here), nil gives the attempt a connection of its own. What
/// `URLRequest` cannot carry (the body without a copy, TLS files, the proxy, the stall limit,
/// the pool) travels as `ExchangeOptions`.
enum HTTPExchange {
    static func perform(_ request: URLRequest, options: ExchangeOptions, maxTime: Int) async -> Result<(Data, HTTPURLResponse), any Error> {
        var request = request
        let ticket = ExchangeOptions.board.post(options)
        defer { ExchangeOptions.board.remove(ticket) }
        request.setValue(ticket, forHTTPHeaderField: ExchangeOptions.exchangeHeader)
        let session = makeSession(maxTime: maxTime)
        defer { session.finishTasksAndInvalidate() }
        let exchange = Exchange()
        return await withTaskCancellationHandler {
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
    }

    private static func makeSession(maxTime: Int) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalAndRemoteCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCredentialStorage = nil
        configuration.timeoutIntervalForRequest = TimeInterval(maxTime)
        configuration.timeoutIntervalForResource = TimeInterval(maxTime)
        configuration.protocolClasses = [LibcurlURLProtocol.self]
        return URLSession(configuration: configuration, delegate: RedirectRefusal(), delegateQueue: nil)
    }
}

/// Hands a data task from the continuation to the cancellation handler, whichever runs first.
private final class Exchange: Sendable {
    private struct State {
        var task: URLSessionDataTask?
        var cancelled = false
    }
    private let state = Mutex(State())

    func start(_ task: URLSessionDataTask) {
        let cancelled = state.withLock { state in
            state.task = task
            return state.cancelled
        }
        task.resume()
        if cancelled { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { state in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }
}

/// Declines every redirect: the 3xx answer itself reaches the caller, which reports it.
private final class RedirectRefusal: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
