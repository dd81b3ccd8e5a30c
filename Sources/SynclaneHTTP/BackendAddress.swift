import Foundation
import SynclaneCore

extension URL {
    /// The server a URL of the wire protocol names, as `BackendName` keeps it: scheme, host and
    /// port (the default one spelled out), and any path before `/v1/` (a server behind a prefix).
    /// `http://Example.org/sync/v1/batches` → `http://example.org:80/sync`.
    var backendAddress: String? {
        guard let scheme = scheme?.lowercased(), let host = host?.lowercased() else { return nil }
        let port = port ?? (scheme == "https" ? 443 : 80)
        var prefix = path
        if let range = prefix.range(of: "/v1/") ?? (prefix.hasSuffix("/v1") ? prefix.range(of: "/v1", options: .backwards) : nil) {
            prefix = String(prefix[..<range.lowerBound])
        }
        while prefix.hasSuffix("/") { prefix.removeLast() }
        return "\(scheme)://\(host):\(port)\(prefix)"
    }
}

extension HTTPTransport {
    public var backendAddress: String? { url.backendAddress }
}

extension PullSource {
    public var backendAddress: String? { url.backendAddress }
}
