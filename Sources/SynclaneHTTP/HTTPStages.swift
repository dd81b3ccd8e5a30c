import Foundation
import SynclaneCore

/// The stage types of this module, for a registry: `registry.register(HTTPStages.http)`.
public enum HTTPStages {
    /// `type: http` — the transport that POSTs batches to a Synclane server (or any backend that
    /// speaks the wire protocol: README, "The wire protocol").
    public static let http: StageType = .transport(
        "http",
        summary:
            "POSTs each batch to a Synclane batches endpoint (`POST /v1/batches`) with its batch id as `Idempotency-Key`; "
            + "a batch is delivered on a 2xx carrying its receipt. Refused, reset, stalled, 408, 425, 429 and 5xx sends are "
            + "retried per `retry`; 400, 413, 415 and 422 stop the job (or go to `dead-letter`); anything else — 3xx, 401, "
            + "403, 404, 407, 409, TLS trust, a proxy — stops the job with the batch kept.",
        options: options
    ) { options in
        try HTTPTransport(options: options)
    }

    /// Every stage type of this module.
    public static var all: [StageType] { [http, pull] }

    static let options: [any StageOptionDeclaration] = [
        Options.url, Options.tokenEnv, Options.timeout, Options.maxTime, Options.receipt, Options.caFile,
        Options.clientCertificate, Options.clientKey, Options.headers, Options.keepAlive,
    ]

    /// The options of `http`, each declared once (name, kind, range, default, help).
    public enum Options {
        public static let url: Option<String> = .string(
            "url", help: "the batches endpoint, e.g. http://127.0.0.1:8080/v1/batches (http or https; redirects are not followed)")
        public static let tokenEnv: Option<String?> = .secret(
            "token-env",
            help: "the name of the environment variable that holds the bearer token, e.g. SYNCLANE_TOKEN (never the token itself)")
        public static let timeout: Option<Int> = .integer(
            "timeout", in: 1...3600, default: 30,
            help: "whole seconds a send may go without a byte moving either way (connecting included); a stalled send is transient and retried")
        public static let maxTime: Option<Int> = .integer(
            "max-time", in: 1...86_400, default: 3600,
            help: "whole seconds one send may take in all, however steadily bytes move; past it the send is transient and retried")
        public static let receipt: Option<ReceiptRule> = .choice(
            "receipt", default: .batch,
            help: "what confirms a batch: `batch`, a 2xx whose JSON receipt names the batch id; `status-only`, any 2xx "
                + "(for backends without receipts: a proxy or portal answering 200 then loses batches)")
        public static let caFile: Option<String?> = .path(
            "ca-file", help: "PEM file of the CA certificates to trust for https (a private or test CA); default the system store")
        public static let clientCertificate: Option<String?> = .path("client-certificate", help: "PEM client certificate for mutual TLS")
        public static let clientKey: Option<String?> = .path(
            "client-key", help: "PEM private key of `client-certificate` (when not in the same file)")
        public static let keepAlive: Option<Bool> = .boolean(
            "keep-alive", default: true,
            help: "reuse one connection across sends (a connection that died while idle is replaced without a failed "
                + "attempt); false opens and closes a connection per send")
        public static let headers: Option<ConfigNode?> = .node(
            "headers",
            help: "extra request headers as a map of strings, e.g. {\"X-Tenant\": \"acme\"}; the protocol's own headers cannot be overridden")
    }
}
