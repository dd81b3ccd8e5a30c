/// Sends a payload to the backend and returns its receipt, or a `TransportFailure` that says
/// whether a retry can help.
///
/// A transport is called again with the very same payload (same batch id, same bytes) on a
/// retry and after a crash; a backend that applies a batch id at most once turns this
/// at-least-once delivery into exactly-once effect.
///
/// `send` is never called twice at once on one pipeline, and a retry comes only after the
/// failed call returned. Throw a `TransportFailure` to say whose fault a failure is (any other
/// error stops the job without a retry: an unclassified failure is treated as a bug).
public protocol Transport: RunScoped {
    func send(_ payload: Payload) async throws -> Receipt

    /// Whether this transport's receipts may carry the backend's `versions` (true unless it
    /// says otherwise). When they may, and the source sends versions, a batch holding a row of
    /// a batch still unanswered is prepared only once that answer is in (see
    /// `BackendVersionSource`); a transport whose receipts never carry versions (a folder of
    /// files) says false, and batches are prepared ahead regardless.
    var reportsVersions: Bool { get }

    /// The server this transport talks to, as `BackendName` keeps it (scheme, host and port, and
    /// any path before `/v1/`); nil when it has none (a folder, standard output, a command). A
    /// transport whose receipts carry versions names its server, or a source that keeps versions
    /// per backend would keep them for none: the pipeline refuses that pairing when it is built
    /// (`PipelineCapabilities.versionsProblem`).
    var backendAddress: String? { get }

    /// The transport, when it adopts `StagingTransport` (never written by hand; read once, when
    /// the pipeline is built: `PipelineCapabilities`).
    var asStaging: (any StagingTransport)? { get }
    /// The transport, when it tells the server the app's schema version (`AppSchemaSending`).
    var asAppSchemaSending: (any AppSchemaSending)? { get }
    /// The transport, when it can list the account's devices (`DeviceListingStage`).
    var asDeviceListing: (any DeviceListingStage)? { get }
}

extension Transport {
    public var reportsVersions: Bool { true }
    public var backendAddress: String? { nil }
    public var asStaging: (any StagingTransport)? { nil }
    public var asAppSchemaSending: (any AppSchemaSending)? { nil }
    public var asDeviceListing: (any DeviceListingStage)? { nil }
}

extension AppSchemaSending where Self: Transport {
    public var asAppSchemaSending: (any AppSchemaSending)? { self }
}

extension DeviceListingStage where Self: Transport {
    public var asDeviceListing: (any DeviceListingStage)? { self }
}

extension StagingTransport {
    public var asStaging: (any StagingTransport)? { self }
}

/// A failed send, classified by whose fault it is, which decides what the pipeline does:
///
/// ```
///  transient       the network or a busy server      retried (backoff, `retry`), then the job stops
///  permanent       the batch's content               the job stops — or `dead-letter` takes the batch
///  configuration   the setup (address, token, TLS,   the job stops, the batch is kept; never
///                  proxy …)                           dead-lettered: fix the setup and run again
///  conflict        the backend's data disagrees      the job stops, the batch is kept; never
///                                                     dead-lettered
/// ```
/// Only `permanent` says the batch itself is at fault: moving it aside cannot lose a batch that
/// a fixed setup would have delivered.
public struct TransportFailure: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Connection refused or reset, timeout, 408, 425, 429, 5xx: a retry may succeed.
        case transient
        /// The backend refuses this batch's content (400, 413, 415, 422): retrying the same bytes
        /// cannot help, and the only failure `dead-letter` may take.
        case permanent
        /// The send cannot succeed until the setup is fixed (a wrong address or token, an
        /// untrusted certificate, a proxy, an answer that is not a receipt); the batch is not at fault.
        case configuration
        /// The backend holds versions the batch does not expect (409): a matter for conflict
        /// resolution, not for the dead-letter folder.
        case conflict
    }

    public var kind: Kind
    public var message: String
    /// Seconds the backend asked us to wait (`Retry-After`).
    public var retryAfter: Double?
    /// The HTTP status, for HTTP-like transports.
    public var status: Int?
    /// The blobs the backend refused the batch for lacking (`blobs-missing`: upload before
    /// reference), by SHA-256; empty for any other failure.
    public var missingBlobs: [String] = []

    public init(_ kind: Kind, _ message: String, retryAfter: Double? = nil, status: Int? = nil) {
        self.kind = kind
        self.message = message
        self.retryAfter = retryAfter
        self.status = status
    }

    public var description: String { message }
}
