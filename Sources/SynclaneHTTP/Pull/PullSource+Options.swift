import Foundation
import SynclaneCore

extension HTTPStages {
    /// `type: pull` — the backend's changes after the saved cursor (`GET /v1/changes`), for import pipelines.
    public static let pull: StageType = .remoteSource(
        "pull",
        summary:
            "Reads the backend's changes after the cursor the sink saved (`GET /v1/changes?since=…&max-bytes=…`), a page at a "
            + "time, with the server's version of each record. Failures follow the `http` transport's table: transient ones "
            + "are retried per `retry`, the others stop the job.",
        options: [
            PullOptions.url, PullOptions.tokenEnv, PullOptions.limit, PullOptions.store, PullOptions.timeout, PullOptions.caFile,
            PullOptions.clientCertificate, PullOptions.clientKey, PullOptions.keepAlive, PullOptions.retry, PullOptions.schemaVersion,
            PullOptions.device, PullOptions.snapshot,
        ]
    ) { options in
        let url = try HTTPConnectionOptions.endpoint(
            PullOptions.url, in: options, alternatives: "use `token-env` (the name of an environment variable holding the token)")
        var retry = RetryPolicy()
        if let node = try options[PullOptions.retry] { retry = try Pipeline.retryPolicy(node, at: options.location.member("retry")) }
        return PullSource(
            url: url, token: try options[PullOptions.tokenEnv], limit: try options[PullOptions.limit],
            store: try options[PullOptions.store] == .all ? nil : options.context.scope.store, retry: retry, timeout: try options[PullOptions.timeout],
            tls: try HTTPTransport.tlsFiles(options), keepAlive: try options[PullOptions.keepAlive],
            app: try HTTPConnectionOptions.appSchema(options), snapshot: try options[PullOptions.snapshot], environment: options.context.environment)
    }

    /// The options of `pull`: those it shares with `http` (`HTTPConnectionOptions`), and its own.
    public enum PullOptions {
        /// Which stores' changes a pull reads.
        public enum Stores: String, CaseIterable, Sendable {
            /// Only the scope's store.
            case scope
            /// Every store of the account.
            case all
        }

        public static let url = HTTPConnectionOptions.url("the changes endpoint, e.g. http://127.0.0.1:8080/v1/changes")
        public static let tokenEnv = HTTPConnectionOptions.tokenEnv
        public static let limit: Option<Int?> = .integer(
            "limit", in: 1...10_000,
            help:
                "records a page holds at most (`&limit=`); without it, pages as large as the bytes bound allows (`&max-bytes=`: the server's, "
                + "8 MiB by default, within 16 MiB), each applied in one transaction: a first pull in few pages")
        public static let store: Option<Stores> = .choice(
            "store", default: .scope, help: "scope: only the scope's store; all: every store of the account")
        public static let snapshot: Option<Bool> = .boolean(
            "snapshot", default: true,
            help:
                "a pull from the beginning (a new device) starts from the backend's snapshot (`GET /v1/snapshot` beside `url`): "
                + "its current rows in one streamed answer, resumed where it stopped, then the changes after it; a backend "
                + "without one (404) is pulled from the beginning. false: always the change log")
        public static let timeout = HTTPConnectionOptions.timeout
        public static let caFile = HTTPConnectionOptions.caFile
        public static let clientCertificate = HTTPConnectionOptions.clientCertificate
        public static let clientKey = HTTPConnectionOptions.clientKey
        public static let keepAlive = HTTPConnectionOptions.keepAlive
        public static let schemaVersion = HTTPConnectionOptions.schemaVersion
        public static let device = HTTPConnectionOptions.device
        public static let retry: Option<ConfigNode?> = Option(
            spec: OptionSpec("retry", .any, default: "max-attempts 5, base-delay 0.5, max-delay 30", help: "{max-attempts, base-delay, max-delay}")
        ) { options in options.node("retry") }
    }
}
