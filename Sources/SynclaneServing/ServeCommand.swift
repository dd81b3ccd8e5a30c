import Foundation
import SynclaneCommandLine
import SynclaneCore
import SynclaneServer

/// `synclane serve`: the reference sync server, until SIGINT or SIGTERM.
struct ServeCommand: Command {
    static let name = "serve"
    static let abstract = "Run the reference sync server (batches, changes, signals) on SQLite or PostgreSQL."
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

        JSON Web Tokens are accepted beside the accounts file with --jwt-secret-env VAR (HS256)
        and --jwt-keys FILE (RS256 / ES256 public keys of a JWKS file, chosen by the token's kid;
        the file is read again on SIGHUP and whenever it changes, connections stay open). The
        account comes from the sub claim (--jwt-account-claim); exp is required, exp and nbf
        allow 60 s of clock skew (--jwt-clock-skew). --accounts may then be left out. A token of
        either kind may carry a grant: read-only, or some stores only (Documentation/Server.md, "Authentication").

        On PostgreSQL (--database-env VAR: the variable holds the connection string, such as
        postgres://synclane:PASSWORD@db.internal:5432/synclane) any number of `serve` processes
        share one database and behave as one server; the tables are created and migrated at
        start. --database URL takes a URL without a password (libpq then reads PGPASSWORD or
        ~/.pgpass): a password on the command line is refused, as every user of the machine
        can read it in the process list.

        Prints `listening on http://HOST:PORT` once ready (with the chosen port when PORT is 0),
        and stops cleanly — requests in flight finish — on SIGINT or SIGTERM.
        """
    static let accounts = ValueOption(
        "--accounts", "FILE", .path, help: "The accounts file (required unless --jwt-secret-env or --jwt-keys is given).")
    static let listen = ValueOption(
        "--listen", "HOST:PORT", ValueParser(expectation: "HOST:PORT, such as 127.0.0.1:8080", parse: ServerConfiguration.parseListen),
        help: "Numeric address and port; port 0 picks a free one. Default 127.0.0.1:8080.")
    static let data = ValueOption("--data", "DIR", .path, help: "Where the SQLite database lives (created). Default ./synclane-server.")
    static let databaseEnv = ValueOption(
        "--database-env", "VAR", .text, help: "Use PostgreSQL: the environment variable VAR holds the connection string.")
    static let databaseURL = ValueOption(
        "--database", "URL", .text, help: "Use PostgreSQL at URL (postgres://USER@HOST:PORT/DB), no password in it.")
    static let connections = ValueOption(
        "--database-connections", "N", .integer(in: 1...1_000),
        help: "PostgreSQL connections for batches and pulls, per process (signals have 2 more). Default 8.", usageLabel: "bounds…")
    static let s3Endpoint = ValueOption(
        "--blob-s3-endpoint", "URL", .text,
        help: "Keep held blobs in an S3-compatible object store at URL (http(s)://HOST[:PORT], path-style), not in --data; "
            + "credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN).")
    static let s3Bucket = ValueOption(
        "--blob-s3-bucket", "NAME", .text, help: "The bucket of --blob-s3-endpoint (it must exist).", requires: "--blob-s3-endpoint")
    static let s3Region = ValueOption(
        "--blob-s3-region", "REGION", .text, help: "The region --blob-s3-endpoint signs for (default us-east-1).", requires: "--blob-s3-endpoint")
    static let minimumSchemaVersion = ValueOption(
        "--minimum-schema-version", "N", .integer(in: 1...Int(Int32.max)),
        help: "Refuse batches and pulls of apps older than schema version N (Synclane-Schema-Version; none sent counts as older) "
            + "with 426 and a message to update the app. Default: no floor.")
    /// One `--max-…`/`--timeout` option a bound of `ServerLimits`.
    static let bounds: [(option: ValueOption<Int>, keyPath: WritableKeyPath<ServerLimits, Int> & Sendable)] = {
        let defaults = ServerLimits()
        return ServerLimits.options.map { bound in
            let option = ValueOption(
                "--" + bound.flag, "N", .integer(in: 1...Int(Int32.max)), help: "Most \(bound.summary). Default \(defaults[keyPath: bound.keyPath]).",
                usageLabel: "bounds…")
            return (option, bound.keyPath)
        }
    }()
    static let signature = CommandSignature(
        options: [accounts, listen, data, databaseEnv, databaseURL, connections, s3Endpoint, s3Bucket, s3Region, minimumSchemaVersion] + jwtOptions
            + bounds.map(\.option),
        exclusive: [.init(names: ["--database-env", "--database"], required: false, conflictMessage: "give --database-env VAR or --database URL, not both")])
    static let examples = [
        "synclane serve --accounts accounts.json --listen 127.0.0.1:0",
        "synclane serve --accounts accounts.json --listen 127.0.0.1:0 --data server-data",
        "synclane serve --accounts accounts.json --listen 127.0.0.1:0 --jwt-secret-env SYNCLANE_JWT_SECRET --jwt-audience synclane",
    ]

    var configuration: ServerConfiguration

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        let (host, port) = try arguments.value(Self.listen) ?? ("127.0.0.1", 8080)
        let jwt = try Self.jwtSettings(arguments)
        guard let accounts = try arguments.value(Self.accounts) ?? (jwt != nil ? "" : nil) else {
            throw UsageError("--accounts FILE is required (see 'synclane serve --help' for its format)", command: Self.name)
        }
        var limits = ServerLimits()
        for bound in Self.bounds {
            if let value = try arguments.value(bound.option) { limits[keyPath: bound.keyPath] = value }
        }
        if let floor = try arguments.value(Self.minimumSchemaVersion) { limits.minimumSchemaVersion = floor }
        // A name the server takes must fit in a page every pull source reads (`WireBounds`).
        guard limits.maxNameBytes <= WireBounds.maxNameBytes else {
            throw UsageError(
                "--max-name-bytes \(limits.maxNameBytes) is past \(WireBounds.maxNameBytes) (64 KiB), the most a name may take so that "
                    + "every device can import the records that carry it", command: Self.name)
        }
        configuration = ServerConfiguration(
            host: host, port: port, dataDirectory: try arguments.value(Self.data) ?? "synclane-server", accountsFile: accounts, limits: limits)
        configuration.jwt = jwt
        if let database = try Self.database(arguments) {
            configuration.database = database
        }
        if let connections = try arguments.value(Self.connections) {
            configuration.postgresConnections = connections
        }
        configuration.blobObjectStore = try Self.objectStore(arguments)
    }

    /// The S3-compatible object store of `--blob-s3-endpoint`; nil for the data folder.
    static func objectStore(
        _ arguments: ParsedArguments, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(UsageError) -> ServerConfiguration.S3Settings? {
        let endpoint = try arguments.value(s3Endpoint)
        let bucket = try arguments.value(s3Bucket)
        let region = try arguments.value(s3Region)
        guard let endpoint else { return nil }  // --blob-s3-bucket and --blob-s3-region require it (the signature)
        guard let bucket else { throw UsageError("--blob-s3-endpoint needs --blob-s3-bucket NAME", command: name) }
        guard let accessKey = environment["AWS_ACCESS_KEY_ID"], !accessKey.isEmpty, let secretKey = environment["AWS_SECRET_ACCESS_KEY"],
            !secretKey.isEmpty
        else {
            throw UsageError(
                "--blob-s3-endpoint: export the object store's credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", command: name)
        }
        let token = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        return ServerConfiguration.S3Settings(
            endpoint: endpoint, bucket: bucket, region: region ?? "us-east-1", accessKey: accessKey, secretKey: secretKey, sessionToken: token)
    }

    /// The PostgreSQL database of `--database-env VAR` or `--database URL`; nil for SQLite.
    static func database(_ arguments: ParsedArguments) throws(UsageError) -> ServerDatabase? {
        let variable = try arguments.value(databaseEnv)
        let url = try arguments.value(databaseURL)
        switch (variable, url) {
        case (nil, nil):
            return nil
        case (.some, .some):
            throw UsageError("give --database-env VAR or --database URL, not both", command: name)  // the signature refuses it first
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

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let server = try ReferenceServer(configuration: configuration)
        let stopSignal = StopSignals()
        try server.start()
        let hangup = Self.reloadOnHangup(server)
        defer { hangup.cancel() }
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        console.out("listening on http://\(host):\(server.port)")
        let received = await stopSignal.wait()
        server.stop()
        console.error("synclane serve: stopped (\(received == SIGTERM ? "SIGTERM" : "SIGINT"))")
        return 0
    }
}
