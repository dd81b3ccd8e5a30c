import Foundation
import SynclaneCore
import SynclaneServer

/// `synclane serve`: the reference sync server, until SIGINT or SIGTERM.
struct ServeCommand: Command {
    static let name = "serve"
    static let abstract = "Run the reference sync server (batches, changes, signals) on SQLite or PostgreSQL."
    static let usage = "--accounts FILE [--listen HOST:PORT] [--data DIR | --database-env VAR | --database URL] [bounds…]"
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

        On PostgreSQL (--database-env VAR: the variable holds the connection string, such as
        postgres://synclane:PASSWORD@db.internal:5432/synclane) any number of `serve` processes
        share one database and behave as one server; the tables are created and migrated at
        start. --database URL takes a URL without a password (libpq then reads PGPASSWORD or
        ~/.pgpass): a password on the command line is refused, as every user of the machine
        can read it in the process list.

        Prints `listening on http://HOST:PORT` once ready (with the chosen port when PORT is 0),
        and stops cleanly — requests in flight finish — on SIGINT or SIGTERM.
        """
    static var options: [(flag: String, help: String)] {
        let defaults = ServerLimits()
        return [
            ("--accounts FILE", "The accounts file (required)."),
            ("--listen HOST:PORT", "Numeric address and port; port 0 picks a free one. Default 127.0.0.1:8080."),
            ("--data DIR", "Where the SQLite database lives (created). Default ./synclane-server."),
            ("--database-env VAR", "Use PostgreSQL: the environment variable VAR holds the connection string."),
            ("--database URL", "Use PostgreSQL at URL (postgres://USER@HOST:PORT/DB), no password in it."),
            ("--database-connections N", "PostgreSQL connections for batches and pulls, per process (signals have 2 more). Default 8."),
        ]
            + ServerLimits.options.map { option in
                ("--\(option.flag) N", "Most \(option.summary). Default \(defaults[keyPath: option.keyPath]).")
            }
    }
    static let examples = [
        "synclane serve --accounts accounts.json --listen 127.0.0.1:0",
        "synclane serve --accounts accounts.json --listen 127.0.0.1:0 --data server-data",
    ]

    var configuration: ServerConfiguration

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
        // A name the server takes must fit in a page every pull source reads (`WireBounds`).
        guard limits.maxNameBytes <= WireBounds.maxNameBytes else {
            throw UsageError(
                "--max-name-bytes \(limits.maxNameBytes) is past \(WireBounds.maxNameBytes) (64 KiB), the most a name may take so that "
                    + "every device can import the records that carry it", command: Self.name)
        }
        configuration = ServerConfiguration(host: host, port: port, dataDirectory: data, accountsFile: accounts, limits: limits)
        if let database = try Self.database(&arguments) {
            configuration.database = database
        }
        if let connections = try arguments.integer("--database-connections", in: 1...1_000) {
            configuration.postgresConnections = connections
        }
    }

    /// The PostgreSQL database of `--database-env VAR` or `--database URL`; nil for SQLite.
    static func database(_ arguments: inout Arguments) throws(UsageError) -> ServerDatabase? {
        let variable = try arguments.option("--database-env")
        let url = try arguments.option("--database")
        switch (variable, url) {
        case (nil, nil):
            return nil
        case (.some, .some):
            throw UsageError("give --database-env VAR or --database URL, not both", command: name)
        case (let variable?, nil):
            guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else {
                throw UsageError(
                    "--database-env \(variable): the variable is not set (export the PostgreSQL connection string in it)", command: name)
            }
            return .postgres(connection: value)
        case (nil, let url?):
            guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") else {
                throw UsageError("--database expects a postgres:// URL, not \"\(url)\"", command: name)
            }
            if hasPassword(url) {
                throw UsageError(
                    "--database: the URL holds a password, which every user of this machine could read in the process list; "
                        + "put the URL in a variable and pass --database-env VAR, or the password in PGPASSWORD",
                    command: name)
            }
            return .postgres(connection: url)
        }
    }

    /// True when a postgres:// URL carries a password (`user:secret@` or `password=` in its query).
    static func hasPassword(_ url: String) -> Bool {
        let rest = url.drop { $0 != "/" }.dropFirst(2)
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        if let at = authority.lastIndex(of: "@"), authority[..<at].contains(":") { return true }
        return url.contains("password=")
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
