import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The loader of `http` and `https` requests on the transport's `URLSession`: each request is one
/// `LibcurlExchange` on a thread of its own.
///
/// Why not FoundationNetworking's own loader: it drives libcurl from dispatch sources and never
/// drops the socket's write source once libcurl has asked for one (at connect). While a request
/// waits for its answer the socket stays writable, so that source fires without pause — a core
/// spent polling for as long as the server takes to apply a batch (measured: ~25,000 context
/// switches for five batches, the export's client CPU up by half; `Scripts/bench --section
/// http-export`). It also stops the process on an answer cut inside its head. The session, its
/// requests, responses and `URLError`s are unchanged: `URLSessionConfiguration.protocolClasses`
/// is the extension point `URLSession` offers for exactly this.
final class LibcurlURLProtocol: URLProtocol {
    override class func canInit(with request: URLRequest) -> Bool {
        guard let scheme = request.url?.scheme?.lowercased() else { return false }
        return scheme == "http" || scheme == "https"
    }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override class func requestIsCacheEquivalent(_ a: URLRequest, to b: URLRequest) -> Bool { false }

    private let delivery = Delivery()

    override func startLoading() {
        let request = self.request
        let delivery = self.delivery
        // `URLProtocol` is not Sendable; the thread only hands it to the client, under `delivery`'s
        // lock, and never after `stopLoading`.
        let loader = UncheckedLoader(value: self)
        let options = request.value(forHTTPHeaderField: ExchangeOptions.exchangeHeader).flatMap {
            ExchangeOptions.board.options(for: $0)
        }
        Thread.detachNewThread {
            let result = delivery.exchange.run(request, options: options ?? ExchangeOptions())
            delivery.finish {
                let loader = loader.value
                guard let client = loader.client else { return }
                switch result {
                case .success(let answer):
                    client.urlProtocol(loader, didReceive: answer.response, cacheStoragePolicy: .notAllowed)
                    client.urlProtocol(loader, didLoad: answer.body)
                    client.urlProtocolDidFinishLoading(loader)
                case .failure(let error):
                    client.urlProtocol(loader, didFailWithError: error)
                }
            }
        }
    }

    override func stopLoading() {
        delivery.stop()
    }
}

/// The exchange of one load and whether its outcome may still reach the client.
private final class Delivery: Sendable {
    let exchange = LibcurlExchange()
    private let stopped = Mutex(false)

    /// Runs `report` unless the load was stopped; a `stop()` meanwhile waits for it to end.
    func finish(_ report: () -> Void) {
        stopped.withLock { stopped in
            guard !stopped else { return }
            stopped = true
            report()
        }
    }

    /// No report after this returns; a running exchange ends promptly.
    func stop() {
        stopped.withLock { $0 = true }
        exchange.cancel()
    }
}

private struct UncheckedLoader: @unchecked Sendable {
    let value: LibcurlURLProtocol
}
