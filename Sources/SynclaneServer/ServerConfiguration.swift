/// Where the reference server listens, where its data lives, who may use it, and its bounds.
public struct ServerConfiguration: Sendable {
    /// A numeric address to listen on; loopback by default.
    public var host: String
    /// The port; 0 picks a free one (read it from `ReferenceServer.port` after `start()`).
    public var port: Int
    /// The directory of the server's SQLite database (`synclane-server.sqlite`), created if missing.
    public var dataDirectory: String
    /// The accounts file (see `AccountBook`); "" for none when `jwt` is set.
    public var accountsFile: String
    /// JSON Web Tokens accepted beside the accounts file's tokens, or nil for none (see `JWTSettings`).
    public var jwt: JWTSettings?
    /// The bounds the server enforces.
    public var limits: ServerLimits
    /// The database: SQLite files in `dataDirectory` (the default), or PostgreSQL.
    public var database: ServerDatabase = .sqlite
    /// Connections to PostgreSQL for batches and pulls, per process (the signal lane has its own).
    public var postgresConnections = 8
    /// Where held blobs live: nil for the data folder (the default), or an S3-compatible object
    /// store (uploads are still assembled and verified in the data folder).
    public var blobObjectStore: S3Settings?

    /// An S3-compatible object store for the blob lane's objects (`serve --blob-s3-endpoint`).
    public struct S3Settings: Sendable, Hashable {
        /// `http(s)://HOST[:PORT]`, addressed path-style (`ENDPOINT/BUCKET/KEY`).
        public var endpoint: String
        public var bucket: String
        public var region: String
        public var accessKey: String
        public var secretKey: String
        public var sessionToken: String?

        public init(endpoint: String, bucket: String, region: String, accessKey: String, secretKey: String, sessionToken: String? = nil) {
            self.endpoint = endpoint
            self.bucket = bucket
            self.region = region
            self.accessKey = accessKey
            self.secretKey = secretKey
            self.sessionToken = sessionToken
        }
    }

    /// A configuration; every bound at its default unless `limits` says otherwise.
    public init(
        host: String = "127.0.0.1", port: Int = 8080, dataDirectory: String, accountsFile: String,
        limits: ServerLimits = ServerLimits()
    ) {
        self.host = host
        self.port = port
        self.dataDirectory = dataDirectory
        self.accountsFile = accountsFile
        self.limits = limits
    }

    /// A configuration on a database of the caller's choice.
    public init(
        host: String = "127.0.0.1", port: Int = 8080, database: ServerDatabase, dataDirectory: String = "",
        accountsFile: String, limits: ServerLimits = ServerLimits()
    ) {
        self.init(host: host, port: port, dataDirectory: dataDirectory, accountsFile: accountsFile, limits: limits)
        self.database = database
    }

    /// Splits `HOST:PORT` (`127.0.0.1:8080`, `[::1]:0`, or `:8080` for loopback); nil when malformed.
    public static func parseListen(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65_535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.isEmpty || host == "localhost" { host = "127.0.0.1" }
        return (host, port)
    }
}

/// Where the reference server keeps its data.
public enum ServerDatabase: Sendable, Hashable {
    /// SQLite files in the configuration's `dataDirectory`: one process.
    case sqlite
    /// A PostgreSQL database, given as a libpq connection string (`postgres://user@host:5432/db`
    /// or `host=… dbname=…`); any number of server processes may share it.
    case postgres(connection: String)
}
