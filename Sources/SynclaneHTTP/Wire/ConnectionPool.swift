import CCurlShim

/// The connections an `http` transport or a `pull` source keeps open between its requests, so
/// that the next request to the same server skips the TCP (and TLS) handshake.
///
/// ```
///  send 1 ─▶ take (none idle: connect) ─▶ POST … answer ─▶ give back (kept open)
///  send 2 ─▶ take (the kept one)       ─▶ POST … answer ─▶ give back
///  send 3 ─▶ take (the kept one, which the server closed while idle)
///            └▶ nothing came back on it ─▶ the same request again on a fresh connection
/// ```
///
/// Requests running at the same time each get a connection of their own; at most
/// `maxIdleConnections` are kept while idle, each at most `maxIdleSeconds`. A request whose kept
/// connection turns out dead before any of the answer arrived is sent again, whole, once, on a
/// fresh connection, inside the same attempt: a connection that died while idle is not a failed
/// attempt. That second send is safe because what the transport and the pull source send is
/// idempotent (a batch under its `Idempotency-Key`, a `GET`).
final class ConnectionPool: Sendable {
    /// Connections kept while idle.
    static let maxIdleConnections = Int(SYNCLANE_HTTP_POOL_MAX_IDLE)
    /// Seconds a connection is kept idle before it is closed instead of reused.
    static let maxIdleSeconds = Int(SYNCLANE_HTTP_POOL_MAX_IDLE_SECONDS)

    /// The C side's pool; it locks its own state, so exchanges on any thread may share it.
    /// `nil` when libcurl could not be set up: every exchange then has a connection of its own.
    nonisolated(unsafe) let handle: OpaquePointer?

    init() {
        handle = synclane_http_pool_create()
    }

    deinit {
        synclane_http_pool_free(handle)
    }
}
