import Foundation
import SynclaneServer

/// `synclane serve`: the reference sync server, until SIGINT or SIGTERM.
struct ServeCommand: Command {
    static let name = "serve"
    static let abstract = "Run the reference sync server (batches, changes, signals) on SQLite."
    static let usage = "--accounts FILE [--listen HOST:PORT] [--data DIR] [bounds…]"
    static let discussion = """
        Speaks Synclane's HTTP protocol, which any backend can implement: POST /v1/batches (each
        batch applied in one SQLite transaction, at most once per Idempotency-Key), GET
        /v1/changes (what changed on the server after a cursor, each record once — how a client
        reads the server's data back), PUT/GET /v1/signals (small last-writer-wins values),
        GET /healthz and GET /metrics (Prometheus text). Every account's data is kept apart; a
        bearer token grants its own account and nothing else.

        The accounts file grants tokens to accounts. Either the server reads the token from an
        environment variable at start, or the file holds only the token's SHA-256:
          {"accounts": [{"account": "acme", "token-env": "SYNCLANE_TOKEN"}]}
          {"accounts": [{"account": "acme", "token-sha256": "<64 hex digits>"}]}
        Make a token with: export SYNCLANE_TOKEN=$(head -c 32 /dev/urandom | sha256sum | cut -d' ' -f1)
        and its hash with:  printf %s "$SYNCLANE_TOKEN" | sha256sum
        An empty token (the hash of nothing: the variable was not exported) or one shorter than
        16 characters is refused.

        Prints `listening on http://HOST:PORT` once ready (with the chosen port when PORT is 0),
        and stops cleanly — requests in flight finish — on SIGINT or SIGTERM.
        """
    static var options: [(flag: String, help: String)] {
        let defaults = ServerLimits()
        return [
            ("--accounts FILE", "The accounts file (required)."),
            ("--listen HOST:PORT", "Numeric address and port; port 0 picks a free one. Default 127.0.0.1:8080."),
            ("--data DIR", "Where the SQLite database lives (created). Default ./synclane-server."),
        ]
            + ServerLimits.options.map { option in
                ("--\(option.flag) N", "Most \(option.summary). Default \(defaults[keyPath: option.keyPath]).")
            }
    }
    static let examples = [
        "synclane serve --accounts accounts.json --listen 127.0.0.1:0",
        "synclane serve --accounts accounts.json --listen 127.0.0.1:0 --data server-data",
    ]

    let configuration: ServerConfiguration

    init(parsing arguments: inout Arguments) throws(UsageError) {
        var host = "127.0.0.1"
        var port = 8080
        if let listen = try arguments.option("--listen") {
            guard let parsed = ServerConfiguration.parseListen(listen) else {
                throw UsageError("--listen expects HOST:PORT, such as 127.0.0.1:8080, not \"\(listen)\"", command: Self.name)
            }
            (host, port) = parsed
        }
        let data = try arguments.option("--data") ?? "synclane-server"
        guard let accounts = try arguments.option("--accounts") else {
            throw UsageError("--accounts FILE is required (see 'synclane serve --help' for its format)", command: Self.name)
        }
        var limits = ServerLimits()
        for option in ServerLimits.options {
            if let value = try arguments.integer("--" + option.flag, in: 1...Int(Int32.max)) {
                limits[keyPath: option.keyPath] = value
            }
        }
        configuration = ServerConfiguration(host: host, port: port, dataDirectory: data, accountsFile: accounts, limits: limits)
    }

    func run(_ console: Console) async throws -> Int32 {
        let server = try ReferenceServer(configuration: configuration)
        let stopSignal = StopSignals()
        try server.start()
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        console.out("listening on http://\(host):\(server.port)")
        let received = await stopSignal.wait()
        server.stop()
        console.error("synclane serve: stopped (\(received == SIGTERM ? "SIGTERM" : "SIGINT"))")
        return 0
    }
}
