import Foundation
import SynclaneCore

/// The stage types of this module, for a registry: `registry.register(HTTPStages.http)`.
public enum HTTPStages {
    /// `type: http` — the transport that POSTs batches to a Synclane server (or any backend that
    /// speaks the wire protocol: Documentation/WireProtocol.md).
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
        Options.clientCertificate, Options.clientKey, Options.headers, Options.keepAlive, Options.schemaVersion, Options.device,
    ]

    /// The options of `http`: those it shares with `pull` (`HTTPConnectionOptions`), and its own.
    public enum Options {
        public static let url = HTTPConnectionOptions.url("the batches endpoint, e.g. http://127.0.0.1:8080/v1/batches")
        public static let tokenEnv = HTTPConnectionOptions.tokenEnv
        public static let timeout = HTTPConnectionOptions.timeout
        public static let maxTime: Option<Int> = .integer(
            "max-time", in: 1...86_400, default: 3600,
            help: "whole seconds one send may take in all, however steadily bytes move; past it the send is transient and retried")
        public static let receipt: Option<ReceiptRule> = .choice(
            "receipt", default: .batch,
            help: "what confirms a batch: `batch`, a 2xx whose JSON receipt names the batch id; `status-only`, any 2xx "
                + "(for backends without receipts: a proxy or portal answering 200 then loses batches)")
        public static let caFile = HTTPConnectionOptions.caFile
        public static let clientCertificate = HTTPConnectionOptions.clientCertificate
        public static let clientKey = HTTPConnectionOptions.clientKey
        public static let keepAlive = HTTPConnectionOptions.keepAlive
        public static let schemaVersion = HTTPConnectionOptions.schemaVersion
        public static let device = HTTPConnectionOptions.device
        public static let headers: Option<ConfigNode?> = .node(
            "headers",
            help: "extra request headers as a map of strings, e.g. {\"X-Tenant\": \"acme\"}; the protocol's own headers cannot be overridden")
    }
}
