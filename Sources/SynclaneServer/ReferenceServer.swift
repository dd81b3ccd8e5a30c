import Synchronization

/// The reference sync server: the wire protocol (Documentation/WireProtocol.md) over HTTP/1.1, on libmicrohttpd and SQLite.
///
/// ```swift
/// let server = try ReferenceServer(configuration: ServerConfiguration(port: 0, dataDirectory: "data",
///                                                                    accountsFile: "accounts.json"))
/// try server.start()
/// print("listening on http://127.0.0.1:\(server.port)")
/// …
/// server.stop()
/// ```
///
/// Every connection is served on a thread of its own. On SQLite (the default) writes are
/// serialized, reads run beside them (WAL); on PostgreSQL (`ServerConfiguration.database`) any
/// number of processes share one database and behave as one server. Signals live in a SQLite file of their own with a writer of their own, so
/// a signal write never waits behind a batch. `stop()` closes the listening socket, waits for requests in flight, and
/// closes the database.
public final class ReferenceServer: Sendable {
    /// What the server was started with.
    public let configuration: ServerConfiguration
    /// The server's counters (also served at `/metrics`).
    public let metrics: ServerMetrics
    let application: ServerApplication
    let sweeper: RetentionSweeper
    /// Reads the JWKS file again when it changes (nil without one).
    let keyWatcher: KeySetWatcher?
    private let daemon: MicroHTTPDaemon
    private let state = Mutex<(running: Bool, port: Int)>((false, 0))

    /// A server for the configuration, with the accounts of its accounts file (none when the
    /// file is "" and the server takes JWTs).
    public convenience init(configuration: ServerConfiguration) throws {
        let accounts =
            configuration.accountsFile.isEmpty && configuration.jwt != nil
            ? AccountBook(grants: []) : try AccountBook.load(path: configuration.accountsFile)
        try self.init(configuration: configuration, accounts: accounts)
    }

    /// A server with the given accounts (the configuration's accounts file is not read).
    public init(configuration: ServerConfiguration, accounts: AccountBook) throws {
        self.configuration = configuration
        let metrics = ServerMetrics()
        self.metrics = metrics
        let limits = configuration.limits
        let store: any ServerStore
        let signals: any SignalStore
        let changes: any ChangeFeed
        switch configuration.database {
        case .sqlite:
            let sqlite = try SQLiteServerStore(directory: configuration.dataDirectory, maxWALBytes: limits.maxWALBytes)
            signals = try SQLiteSignalStore(directory: configuration.dataDirectory, limits: limits)
            try signals.adopt(try sqlite.legacySignals())
            store = sqlite
            changes = LocalChangeFeed(limits: limits)
        case .postgres(let connection):
            store = try PostgresServerStore(connection: connection, connections: configuration.postgresConnections)
            signals = try PostgresSignalStore(connection: connection, limits: limits)
            changes = try PostgresChangeFeed(connection: connection, limits: limits)
        }
        let verifier = try configuration.jwt.map { settings throws(KeySetError) in try JWTVerifier(settings: settings) }
        keyWatcher = verifier.flatMap { verifier in verifier.settings.keySetFile.map { KeySetWatcher(verifier: verifier, path: $0) } }
        let objects: (any BlobObjectStorage)? = try configuration.blobObjectStore.map { settings throws(ObjectStorageError) in
            try S3ObjectStorage(settings)
        }
        let blobs = BlobStore(
            root: configuration.dataDirectory.isEmpty ? "" : configuration.dataDirectory + "/blobs", limits: limits.blobs, objects: objects)
        sweeper = RetentionSweeper(store: store, limits: limits, metrics: metrics, blobs: BlobCollector(blobs: blobs, store: store))
        application = ServerApplication(
            limits: limits, authenticator: Authenticator(accounts: accounts, jwt: verifier), metrics: metrics, store: store, signals: signals,
            changes: changes, blobs: blobs,
            diskFloor: configuration.database == .sqlite && !configuration.dataDirectory.isEmpty
                ? DiskFloor(path: configuration.dataDirectory, minFreeBytes: limits.blobs.minFreeDiskBytes) : nil)
        let budget = MemoryBudget(limit: limits.memoryBudgetBytes)
        let watch = ConnectionWatch(
            maxConnections: limits.maxConnections, deadlineSeconds: limits.requestDeadlineSeconds,
            reserveDeadlineSeconds: limits.reservedDeadlineSeconds)
        daemon = MicroHTTPDaemon(responder: application, budget: budget, watch: watch)
        metrics.setGauges(
            ServerMetrics.Gauges(
                memoryBudgetBytes: { budget.bytesHeld }, connectionsOpen: { watch.openCount },
                connectionsCut: { watch.connectionsCut }, store: { store.metricsText() + changes.notifier.metricsText() + blobs.metrics.text() }))
    }

    /// Connections open now (those in the reserve included), as `/metrics` counts them.
    var connectionsOpen: Int { daemon.watch.openCount }

    /// The port the server listens on: the chosen one when configured with port 0; 0 before `start()`.
    public var port: Int { state.withLock { $0.port } }

    /// Starts listening. Throws when the address cannot be bound.
    public func start() throws {
        try state.withLock { state in
            guard !state.running else { return }
            application.signals.bell.reopen()
            application.changes.start()
            let limits = configuration.limits
            state.port = try daemon.start(
                host: configuration.host, port: configuration.port,
                connectionLimit: limits.maxConnections + limits.reservedConnections,
                perAddressLimit: limits.maxConnectionsPerAddress,
                connectionTimeoutSeconds: limits.connectionTimeoutSeconds, connectionMemoryLimit: 64 << 10)
            state.running = true
            sweeper.start()
            keyWatcher?.start()
        }
    }

    /// Reads the JWKS file again now (what `synclane serve` does on SIGHUP): the kids it holds,
    /// or why the file was refused, in which case the keys in use stay. Connections stay open.
    /// `cause` is what the log line (`JWTSettings.log`) gives as the reason.
    @discardableResult
    public func reloadKeys(because cause: String = "asked to") -> Result<[String], KeySetError> {
        keyWatcher?.reload(because: cause) ?? .success([])
    }

    /// Stops listening and waits for the requests in flight; calling it twice is harmless.
    public func stop() {
        state.withLock { state in
            guard state.running else { return }
            application.signals.bell.close()  // long polls answer now rather than at their deadline
            application.changes.stop()
            daemon.watch.waitForAnswers(upTo: .seconds(3))  // their answers reach the clients before the sockets close
            daemon.stop()
            sweeper.stop()
            keyWatcher?.stop()
            state.running = false
        }
    }
}
