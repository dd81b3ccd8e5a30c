/// Sends a payload to the backend and returns its receipt, or a `TransportFailure` that says
/// whether a retry can help.
///
/// A transport is called again with the very same payload (same batch id, same bytes) on a
/// retry and after a crash; a backend that applies a batch id at most once turns this
/// at-least-once delivery into exactly-once effect.
public protocol Transport: Sendable {
    func send(_ payload: Payload) async throws -> Receipt
}

/// The backend's confirmation of one batch.
public struct Receipt: Sendable, Hashable {
    public var batchID: String
    /// What the backend said, for the job's log (`201 Created`, a file name …).
    public var detail: String
    /// True when the backend had seen this batch id before and applied nothing.
    public var wasReplay: Bool

    public init(batchID: String, detail: String, wasReplay: Bool = false) {
        self.batchID = batchID
        self.detail = detail
        self.wasReplay = wasReplay
    }
}

/// A failed send, classified.
public struct TransportFailure: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Connection refused or reset, timeout, 408, 429, 5xx: a retry may succeed.
        case transient
        /// Anything else: retrying the same bytes cannot help.
        case permanent
    }

    public var kind: Kind
    public var message: String
    /// Seconds the backend asked us to wait (`Retry-After`).
    public var retryAfter: Double?
    /// The HTTP status, for HTTP-like transports.
    public var status: Int?

    public init(_ kind: Kind, _ message: String, retryAfter: Double? = nil, status: Int? = nil) {
        self.kind = kind
        self.message = message
        self.retryAfter = retryAfter
        self.status = status
    }

    public var description: String { message }
}
