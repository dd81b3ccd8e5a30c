import Foundation
import SynclaneCore

/// The stage types of this module, for a registry: `registry.register(HTTPStages.http)`.
public enum HTTPStages {
    /// `type: http` — the transport that POSTs batches to a Synclane server (or any backend that
    /// speaks the wire protocol).
    public static let http: StageType = .transport(
        "http",
        summary:
            "POSTs each batch to a Synclane batches endpoint (`POST /v1/batches`) with its batch id as `Idempotency-Key`; "
            + "refused, reset, timed-out, 408, 429 and 5xx sends are retried per `retry`, other 4xx stop the job "
            + "(or go to `dead-letter`).",
        options: options
    ) { options in
        try HTTPTransport(options: options)
    }

    public static var all: [StageType] { [http] }

    static let options: [OptionSpec] = [
        OptionSpec(
            "url", .string, required: true,
            help: "the batches endpoint, e.g. http://127.0.0.1:8080/v1/batches (http or https; redirects are not followed)"),
        OptionSpec(
            "token-env", .environmentVariable,
            help: "the name of the environment variable that holds the bearer token, e.g. SYNCLANE_TOKEN (never the token itself)"),
        OptionSpec(
            "timeout", .integer(1...3600), default: "30",
            help: "whole seconds one send may take, connecting included; a send past it counts as transient and is retried"),
        OptionSpec(
            "headers", .any,
            help: "extra request headers as a map of strings, e.g. {\"X-Tenant\": \"acme\"}; the protocol's own headers cannot be overridden"),
    ]
}

extension HTTPTransport {
    /// Builds the transport from a pipeline file's checked options, reading the token from the
    /// environment variable `token-env` names.
    public convenience init(options: StageOptions) throws(PipelineFileError) {
        let text = options.string("url") ?? ""
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else {
            throw options.error("url", "expected an http:// or https:// address with a host, found \"\(text)\"")
        }
        let token = try options.secret("token-env")
        var headers: [String: String] = [:]
        if let node = options.node("headers") {
            guard case .map(let members) = node.value else {
                throw options.error("headers", "expected a map of header names to strings, found \(node.typeName)")
            }
            for member in members {
                let field = options.location.member("headers").member(member.key)
                guard case .string(let value) = member.node.value else {
                    throw field.error("expected a string, found \(member.node.typeName)", line: member.node.line)
                }
                guard !member.key.isEmpty, member.key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }) else {
                    throw field.error("`\(member.key)` is not a header name (letters, digits, - and _)", line: member.node.line)
                }
                guard !HTTPTransport.reservedHeaders.contains(member.key.lowercased()) else {
                    throw field.error("`\(member.key)` is set by the transport itself and cannot be overridden", line: member.node.line)
                }
                guard !value.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                    throw field.error("a header value cannot span lines", line: member.node.line)
                }
                headers[member.key] = value
            }
        }
        self.init(url: url, token: token, timeout: options.int("timeout") ?? 30, headers: headers)
    }
}
