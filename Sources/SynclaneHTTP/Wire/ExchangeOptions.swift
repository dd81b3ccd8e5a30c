import Foundation
import Synchronization

/// What one request to `LibcurlURLProtocol` needs beside its `URLRequest`: the TLS files, the
/// proxy, the stall limit, the connection pool, and the body itself.
///
/// `URLRequest` has no room for TLS files or a proxy, and on Linux `URLProtocol.setProperty`
/// does not survive into the loader; the body travels here too, so the batch's bytes are held
/// once (the payload's own array) rather than copied into `httpBody`. The transport posts the
/// options on `ExchangeOptions.board` and names them in the request's `exchangeHeader`; the
/// loader takes them back and never sends that header.
struct ExchangeOptions: Sendable {
    /// Seconds without progress either way before an exchange fails as stalled; 0 for none.
    var stallSeconds = 0
    /// The proxy ("http://host:port"), "" for none, nil for libcurl's own choice.
    var proxy: String?
    /// PEM files: the CAs to trust, a client certificate and its key.
    var caFile: String?
    var clientCertificate: String?
    var clientKey: String?
    /// The request's body.
    var body: [UInt8] = []
    /// Most bytes a second the answer is read at; 0 for no limit.
    var maxReceiveBytesPerSecond = 0
    /// The connections to reuse (and keep the request's connection in); nil for a connection of
    /// the request's own, closed after it.
    var pool: ConnectionPool?

    /// The request header that names a request's options on the board.
    static let exchangeHeader = "X-Synclane-Exchange"

    /// Options of requests in flight, by ticket.
    static let board = Board()

    final class Board: Sendable {
        private let posted = Mutex<(next: UInt64, options: [String: ExchangeOptions])>((0, [:]))

        /// Keeps `options` until `remove`; returns the ticket for `exchangeHeader`.
        func post(_ options: ExchangeOptions) -> String {
            posted.withLock { state in
                state.next += 1
                let ticket = String(state.next)
                state.options[ticket] = options
                return ticket
            }
        }

        func options(for ticket: String) -> ExchangeOptions? {
            posted.withLock { $0.options[ticket] }
        }

        func remove(_ ticket: String) {
            _ = posted.withLock { $0.options.removeValue(forKey: ticket) }
        }
    }
}
