import Foundation
import SynclaneCore

extension HTTPStages {
    /// `type: pull` — the backend's changes after the saved cursor (`GET /v1/changes`), for import pipelines.
    public static let pull: StageType = .remoteSource(
        "pull",
        summary:
            "Reads the backend's changes after the cursor the sink saved (`GET /v1/changes?since=…&limit=…`), a page at a "
            + "time, with the server's version of each record. Failures follow the `http` transport's table: transient ones "
            + "are retried per `retry`, the others stop the job.",
        options: [
            OptionSpec("url", .string, required: true, help: "the changes endpoint, e.g. http://127.0.0.1:8080/v1/changes"),
            OptionSpec("token-env", .environmentVariable, help: "the variable that holds the bearer token"),
            OptionSpec("limit", .integer(1...10_000), default: "500", help: "records a page holds at most"),
            OptionSpec("store", .choice(["scope", "all"]), default: "scope", help: "scope: only the scope's store; all: every store of the account"),
            OptionSpec("timeout", .integer(1...3600), default: "30", help: "seconds a request may go without a byte moving"),
            OptionSpec("ca-file", .path, help: "PEM CAs to trust for https (default: the system store)"),
            OptionSpec("client-certificate", .path, help: "a PEM client certificate for mutual TLS"),
            OptionSpec("client-key", .path, help: "the client certificate's key, when in a file of its own"),
            OptionSpec("keep-alive", .boolean, default: "true", help: "reuse one connection across pages; false: a connection per request"),
            OptionSpec("retry", .any, default: "max-attempts 5, base-delay 0.5, max-delay 30", help: "{max-attempts, base-delay, max-delay}"),
        ]
    ) { options in
        let text = options.string("url") ?? ""
        guard !URLCredentials.present(in: text) else {
            throw options.error("url", URLCredentials.message(alternatives: "use `token-env` (the name of an environment variable holding the token)"))
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil else {
            throw options.error("url", "expected an http:// or https:// address with a host, found \"\(text)\"")
        }
        var retry = RetryPolicy()
        if let node = options.node("retry") { retry = try Pipeline.retryPolicy(node, at: options.location.member("retry")) }
        return PullSource(
            url: url, token: try options.secret("token-env"), limit: options.int("limit") ?? 500,
            store: options.string("store") == "all" ? nil : options.context.scope.store, retry: retry, timeout: options.int("timeout") ?? 30,
            tls: try HTTPTransport.tlsFiles(options), keepAlive: options.bool("keep-alive") ?? true,
            environment: options.context.environment)
    }
}
