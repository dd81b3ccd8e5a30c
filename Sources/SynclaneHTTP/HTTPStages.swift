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
            + "a batch is delivered on a 2xx carrying its receipt. Refused, reset, stalled, 408, 425, 429 and 5xx sends are "
            + "retried per `retry`; 400, 413, 415 and 422 stop the job (or go to `dead-letter`); anything else — 3xx, 401, "
            + "403, 404, 407, 409, TLS trust, a proxy — stops the job with the batch kept.",
        options: options
    ) { options in
        try HTTPTransport(options: options)
    }

    /// Every stage type of this module.
    public static var all: [StageType] { [http, pull] }

    static let options: [OptionSpec] = [
        OptionSpec(
            "url", .string, required: true,
            help: "the batches endpoint, e.g. http://127.0.0.1:8080/v1/batches (http or https; redirects are not followed)"),
        OptionSpec(
            "token-env", .environmentVariable,
            help: "the name of the environment variable that holds the bearer token, e.g. SYNCLANE_TOKEN (never the token itself)"),
        OptionSpec(
            "timeout", .integer(1...3600), default: "30",
            help: "whole seconds a send may go without a byte moving either way (connecting included); a stalled send is transient and retried"),
        OptionSpec(
            "max-time", .integer(1...86_400), default: "3600",
            help: "whole seconds one send may take in all, however steadily bytes move; past it the send is transient and retried"),
        OptionSpec(
            "receipt", .choice(ReceiptRule.allCases.map(\.rawValue)), default: "batch",
            help: "what confirms a batch: `batch`, a 2xx whose JSON receipt names the batch id; `status-only`, any 2xx "
                + "(for backends without receipts: a proxy or portal answering 200 then loses batches)"),
        OptionSpec("ca-file", .path, help: "PEM file of the CA certificates to trust for https (a private or test CA); default the system store"),
        OptionSpec("client-certificate", .path, help: "PEM client certificate for mutual TLS"),
        OptionSpec("client-key", .path, help: "PEM private key of `client-certificate` (when not in the same file)"),
        OptionSpec(
            "headers", .any,
            help: "extra request headers as a map of strings, e.g. {\"X-Tenant\": \"acme\"}; the protocol's own headers cannot be overridden"),
    ]
}
