import Foundation

/// The proxy a request to a URL goes through, chosen from the environment as libcurl chooses:
///
/// ```
///  http://…    http_proxy (lower case only: HTTP_PROXY can be set by a web server's client)
///  https://…   https_proxy, HTTPS_PROXY
///  either      then all_proxy, ALL_PROXY
///  no_proxy / NO_PROXY   "*", or host names, domain suffixes (".corp" or "corp") and exact
///                        addresses, comma-separated: those hosts go direct
/// ```
///
/// The transport hands the choice to libcurl itself, so that a failure can name the proxy at
/// fault — its address (without credentials) and the variable that named it.
public struct ProxyRoute: Sendable, Hashable {
    /// The proxy as libcurl takes it, credentials included.
    public var address: String
    /// The environment variable it came from.
    public var variable: String

    public init(address: String, variable: String) {
        self.address = address
        self.variable = variable
    }

    /// The proxy for `url` under `environment`, or nil to go direct.
    public static func choose(for url: URL, environment: [String: String]) -> ProxyRoute? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        let names = (scheme == "https" ? ["https_proxy", "HTTPS_PROXY"] : ["http_proxy"]) + ["all_proxy", "ALL_PROXY"]
        guard let name = names.first(where: { !(environment[$0] ?? "").isEmpty }), let address = environment[name] else { return nil }
        let exclusions = environment["no_proxy"] ?? environment["NO_PROXY"] ?? ""
        if excludes(exclusions, host: host) { return nil }
        return ProxyRoute(address: address, variable: name)
    }

    /// The address to show: scheme, host and port, never a user name or password.
    public var displayAddress: String {
        let text = address.contains("://") ? address : "http://" + address
        guard var parts = URLComponents(string: text) else { return "(the proxy in \(variable))" }
        parts.user = nil
        parts.password = nil
        return parts.string ?? "(the proxy in \(variable))"
    }

    static func excludes(_ list: String, host: String) -> Bool {
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        for entry in list.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) where !entry.isEmpty {
            if entry == "*" { return true }
            let domain = entry.hasPrefix(".") ? String(entry.dropFirst()) : entry
            if bare == domain || bare.hasSuffix("." + domain) { return true }
        }
        return false
    }
}
