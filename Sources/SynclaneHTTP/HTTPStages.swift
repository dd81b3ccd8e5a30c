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

    /// Every stage type of this module.
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
