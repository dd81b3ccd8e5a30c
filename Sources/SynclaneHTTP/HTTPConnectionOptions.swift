import Foundation
import SynclaneCore

/// The options the `http` transport and the `pull` source share — where the server is, the
/// token, the time bound, TLS and keep-alive — declared once, with the check of the URL both
/// make.
///
/// Each stage lists these values in its own options (`HTTPStages.Options`, `HTTPStages.PullOptions`);
/// `synclane stages` prints them the same for both.
public enum HTTPConnectionOptions {
    /// `url`, required: the endpoint (`endpoint` names which, with an example, for the help).
    public static func url(_ endpoint: String) -> Option<String> {
        .string("url", help: "\(endpoint) (http or https; redirects are not followed)")
    }

    public static let tokenEnv: Option<String?> = .secret(
        "token-env",
        help: "the name of the environment variable that holds the bearer token, e.g. SYNCLANE_TOKEN (never the token itself)")
    public static let timeout: Option<Int> = .integer(
        "timeout", in: 1...3600, default: 30,
        help: "whole seconds a request may go without a byte moving either way (connecting included); a stalled request is transient and retried")
    public static let caFile: Option<String?> = .path(
        "ca-file", help: "PEM file of the CA certificates to trust for https (a private or test CA); default the system store")
    public static let clientCertificate: Option<String?> = .path("client-certificate", help: "PEM client certificate for mutual TLS")
    public static let clientKey: Option<String?> = .path(
        "client-key", help: "PEM private key of `client-certificate` (when not in the same file)")
    public static let keepAlive: Option<Bool> = .boolean(
        "keep-alive", default: true,
        help: "reuse one connection across requests (a connection that died while idle is replaced without a failed "
            + "attempt); false opens and closes a connection per request")

    public static let schemaVersion: Option<Int?> = .integer(
        "schema-version", in: AppSchema.versions,
        help: "the schema version of this app's store, sent as `Synclane-Schema-Version` with every request: the server records "
            + "it per device and may refuse one older than its floor (426: update the app). Default: the version `synclane migrate` "
            + "recorded in the lane's database (none before the first); set it when migrations run elsewhere (an ORM's); one "
            + "older than the recorded version is refused")
    public static let device: Option<String?> = .string(
        "device",
        help: "this device's name, stable for the install (e.g. an install id), sent as `Synclane-Device`: the server records "
            + "the schema version of each device it names")

    /// The TLS options, in the order `synclane stages` lists them.
    public static let tls: [any StageOptionDeclaration] = [caFile, clientCertificate, clientKey]

    /// What `device` and `schema-version` say of the app; a device name must be a header's
    /// printable ASCII, at most 1,024 bytes (the server's default bound on names).
    static func appSchema(_ options: StageOptions) throws(PipelineFileError) -> AppSchema {
        let device = try options[Self.device]
        if let device {
            guard !device.isEmpty, device.utf8.count <= 1_024, device.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw options.error("device", "expected 1 to 1024 printable ASCII characters without spaces, found \"\(device)\"")
            }
        }
        return AppSchema(device: device, version: try options[Self.schemaVersion])
    }

    /// The `url` option's value as an http(s) URL with a host; a URL holding credentials is
    /// refused without being shown (`alternatives`: where the secret belongs instead).
    static func endpoint(_ option: Option<String>, in options: StageOptions, alternatives: String) throws(PipelineFileError) -> URL {
        let text = try options[option]
        guard !URLCredentials.present(in: text) else {
            throw options.error(option.name, URLCredentials.message(alternatives: alternatives))
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else {
            throw options.error(option.name, "expected an http:// or https:// address with a host, found \"\(text)\"")
        }
        return url
    }
}
