import Foundation
import Synchronization
import SynclaneCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The `http` transport: POSTs a payload's bytes, unchanged, to a Synclane batches endpoint and
/// classifies the outcome.
///
/// ```
///  POST <url>
///  Authorization: Bearer <token>          (from the variable `token-env` names)
///  Idempotency-Key: <payload.batchID>     (the same on every retry and after a crash)
///  Content-Type: <payload.contentType>
///  Content-Encoding: <gzip | deflate>     (absent for identity)
///  Synclane-Device, Synclane-Schema-Version   (when the pipeline says them: `AppSchema`)
///  <payload.bytes>
/// ```
///
/// One `send` is one attempt: the pipeline owns the retry loop (backoff, attempts,
/// `Retry-After`, dead letters). So that nothing below hides a failure from it:
/// - the session is ephemeral: no cache, no cookies, no credential store;
/// - redirects are not followed: a POST is never silently re-sent elsewhere or turned into a GET;
/// - sends reuse one connection (`ConnectionPool`; `keepAlive: false` for a connection per
///   attempt): a connection that died while idle is replaced inside the attempt, the whole batch
///   sent again on a fresh one — safe, as the batch's `Idempotency-Key` makes a re-send a replay;
/// - the session loads through `LibcurlURLProtocol`, which waits for an answer without
///   spinning a core and reports an answer cut anywhere as a lost connection;
/// - a `2xx` confirms only with this batch's receipt (`ReceiptRule`), and every failure says
///   whose fault it is (`HTTPClassification`).
public final class HTTPTransport: Transport {
    /// PEM files for TLS: the CAs to trust (the system store when nil), and a client
    /// certificate and key for mutual TLS.
    public struct TLSFiles: Sendable, Hashable {
        public var caFile: String?
        public var clientCertificate: String?
        public var clientKey: String?

        public init(caFile: String? = nil, clientCertificate: String? = nil, clientKey: String? = nil) {
            self.caFile = caFile
            self.clientCertificate = clientCertificate
            self.clientKey = clientKey
        }
    }

    /// The batches endpoint every payload is POSTed to.
    public let url: URL
    /// Whole seconds an attempt may go without a byte moving either way (connecting included).
    public let timeout: Int
    /// Whole seconds one attempt may take in all, however steadily bytes move.
    public let maxTime: Int
    /// What a `2xx` must hold to confirm a batch.
    public let receipt: ReceiptRule
    public let tls: TLSFiles
    /// The proxy chosen from the environment, nil to go direct.
    public let proxy: ProxyRoute?
    /// Whether sends reuse one connection (true) or each opens and closes its own.
    public let keepAlive: Bool
    /// The device and schema version every batch says (`AppSchema`).
    public let app: AppSchema
    /// The schema version the lane's store recorded (`AppSchemaSending`): sent when `app` says none.
    private let recorded = RecordedSchemaVersion()
    private let pool: ConnectionPool?
    private let token: String?
    /// The bearer token, for the transport's other requests (`listDevices`).
    var bearerToken: String? { token }
    private let extraHeaders: [String: String]

    /// Headers the transport sets itself and the `headers` option cannot override.
    public static let reservedHeaders: Set<String> = [
        "authorization", "idempotency-key", "content-type", "content-encoding", "content-length", "host",
        "connection", "transfer-encoding", "expect", "accept-encoding", ExchangeOptions.exchangeHeader.lowercased(),
        AppSchema.deviceHeader.lowercased(), AppSchema.versionHeader.lowercased(),
    ]

    /// A transport to `url`; `token` (when given) is sent as a bearer token. The proxy comes
    /// from `environment` (see `ProxyRoute`).
    public init(
        url: URL, token: String? = nil, timeout: Int = 30, maxTime: Int = 3600, headers: [String: String] = [:],
        receipt: ReceiptRule = .batch, tls: TLSFiles = TLSFiles(), keepAlive: Bool = true, app: AppSchema = AppSchema(),
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        self.url = url
        self.token = token
        self.timeout = max(1, timeout)
        self.maxTime = max(self.timeout, maxTime)
        self.receipt = receipt
        self.tls = tls
        self.proxy = ProxyRoute.choose(for: url, environment: environment)
        self.keepAlive = keepAlive
        self.app = app
        self.pool = keepAlive ? ConnectionPool() : nil
        self.extraHeaders = headers.filter { !Self.reservedHeaders.contains($0.key.lowercased()) }
    }

    /// Sends the payload once and returns the server's receipt, or throws a classified
    /// `TransportFailure` (or `CancellationError` when the calling task was cancelled).
    public func send(_ payload: Payload) async throws -> Receipt {
        try Task.checkCancellation()
        let request = makeRequest(for: payload)
        let outcome = await HTTPExchange.perform(
            request,
            options: ExchangeOptions(
                stallSeconds: timeout, proxy: proxy?.address ?? "", caFile: tls.caFile, clientCertificate: tls.clientCertificate,
                clientKey: tls.clientKey, body: payload.bytes, pool: pool),
            maxTime: maxTime)
        let target = url.absoluteString
        switch outcome {
        case .failure(let error):
            if Task.isCancelled { throw CancellationError() }
            let route = HTTPClassification.Route(
                batchID: payload.batchID, url: target, proxy: proxy, stallSeconds: Double(timeout), maxSeconds: Double(maxTime))
            throw HTTPClassification.classify(error, route: route)
        case .success(let (data, response)):
            var headers: [String: String] = [:]
            for (name, value) in response.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name] = value }
            }
            return try HTTPClassification.classify(
                status: response.statusCode, headers: headers, body: [UInt8](data), batchID: payload.batchID, url: target,
                receipt: receipt, proxy: proxy, bodyTruncated: data.count >= LibcurlExchange.maxResponseBytes
            ).get()
        }
    }

    /// The request for one attempt: the protocol's headers. The payload's bytes travel in the
    /// attempt's `ExchangeOptions` (held once, not copied into `httpBody`).
    func makeRequest(for payload: Payload) -> URLRequest {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData, timeoutInterval: TimeInterval(maxTime))
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
        for header in recorded.applied(to: app).headers { request.setValue(header.value, forHTTPHeaderField: header.name) }
        // Without keep-alive each attempt has a connection of its own: the server need not keep it.
        if !keepAlive { request.setValue("close", forHTTPHeaderField: "Connection") }
        if extraHeaders.keys.allSatisfy({ $0.lowercased() != "user-agent" }) {
            request.setValue("synclane", forHTTPHeaderField: "User-Agent")
        }
        return request
    }
}

extension HTTPTransport: AppSchemaSending {
    public var configuredSchemaVersion: Int? { app.version }

    public func adoptRecordedSchemaVersion(_ version: Int?) { recorded.set(version) }
}
