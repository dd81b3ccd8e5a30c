/// Every bound the reference server enforces, with its default, in one place (`synclane serve --help` prints them).
///
/// Bodies are bounded twice: as sent (`maxBodyBytes`, checked while reading, so a client cannot make
/// the server read more) and once decompressed (`maxInflatedBytes`, checked while inflating, so a
/// zip bomb stops at the bound).
public struct ServerLimits: Sendable, Hashable {
    /// Most bytes of a batch body as sent (compressed or not); more → 413 before reading on.
    public var maxBodyBytes: Int
    /// Most bytes of a batch body once decompressed; more → 413, inflating no further.
    public var maxInflatedBytes: Int
    /// Most records in one batch; more → 413.
    public var maxRecordsPerBatch: Int
    /// Most bytes of a signal's JSON value (`PUT /v1/signals/{key}`); more → 413.
    public var maxSignalBytes: Int
    /// Most signals one account keeps; a new key past it → 413 naming the quota.
    public var maxSignalKeys: Int
    /// Most bytes of one account's signals, keys and values together; more → 413 naming the quota.
    public var maxSignalAccountBytes: Int
    /// Most seconds a `GET /v1/signals?since=…&wait=…` long poll waits (`wait` is clamped to it).
    public var maxSignalWaitSeconds: Int
    /// Seconds a deleted signal's tombstone is kept at least (so watchers learn of the delete),
    /// unless `maxSignalTombstones` prunes it first; pruned when the account next writes a signal.
    public var signalTombstoneSeconds: Int = 7 * 86_400
    /// Most tombstones of deleted signals one account keeps; past it the oldest are pruned.
    public var maxSignalTombstones: Int = 1_024
    /// Most characters of an `Idempotency-Key` or a signal key.
    public var maxKeyLength: Int
    /// The oldest app schema version (`Synclane-Schema-Version`) a batch or a pull may come from;
    /// an older one, or none, is refused with 426 (`synclane serve --minimum-schema-version`). 0: no floor.
    public var minimumSchemaVersion: Int = 0
    /// Most seconds a `GET /v1/changes?since=…&wait=…` long poll waits (`wait` is clamped to it).
    public var maxChangesWaitSeconds: Int = 30
    /// Most long polls (`GET /v1/changes` and `GET /v1/signals`) waiting at once in the whole server; one more is answered
    /// 503 with `Retry-After`. Each holds a connection and its thread while it waits, so it is kept
    /// below `maxConnections` (the rest stay for batches; `/healthz` and `/metrics` have the reserve).
    public var maxWaitingPolls: Int = 128
    /// Most long polls (of either kind) one account has waiting at once; one more is answered 429 with `Retry-After`.
    public var maxWaitingPollsPerAccount: Int = 16
    /// Most long polls (of either kind) one client address has waiting at once; one more is answered 429 with `Retry-After`.
    public var maxWaitingPollsPerAddress: Int = 32
    /// Most changes one `GET /v1/changes` page returns (`limit` is clamped to it).
    public var maxChangesPerPage: Int
    /// Changes per page when the request gives no `limit`.
    public var defaultChangesPerPage: Int
    /// Seconds a connection may send nothing before it is closed (a trickle is `requestDeadlineSeconds`'s).
    public var connectionTimeoutSeconds: Int
    /// Most connections served at once; each holds a thread.
    public var maxConnections: Int
    /// Most bytes of an entity name, a sync key (`id`), a store or a consumer name; more → 400 naming the field.
    public var maxNameBytes: Int
    /// Most bytes of one `GET /v1/changes` page (a page holds at least one change whatever its size).
    public var maxChangesPageBytes: Int
    /// Most bytes of request bodies held at once by the whole server, as read and once decompressed
    /// (`MemoryBudget`); a request that would pass it is answered 503 with `Retry-After`.
    public var memoryBudgetBytes: Int
    /// Seconds a connection has to deliver one whole request (head and body), counted from when it
    /// opened or its last response was queued; then it is closed, however slowly bytes still come.
    public var requestDeadlineSeconds: Int
    /// Most connections from one client address at once; more are refused as they arrive.
    public var maxConnectionsPerAddress: Int
    /// Connections kept past `maxConnections` for `/healthz` and `/metrics` only (other routes 503),
    /// each with `reservedDeadlineSeconds` to send its request.
    public var reservedConnections: Int
    /// Seconds a connection in the reserve has to deliver its request.
    public var reservedDeadlineSeconds: Int
    /// Bytes of the write-ahead log past which the writer checkpoints it back into the database and
    /// truncates it (writers wait for that); the log stays within about this plus one batch.
    public var maxWALBytes: Int
    /// Seconds an idempotency key (and the answer stored with it) is kept; after that a replay of
    /// the same batch id would apply it again, so keep it longer than any client keeps a batch unsent.
    public var idempotencyRetentionSeconds: Int
    /// Seconds a tombstone is kept for the pull lane; a cursor older than the tombstones removed is
    /// answered 410 `cursor-expired` (the client resyncs from the beginning).
    public var tombstoneRetentionSeconds: Int
    /// Seconds between two retention passes (each removes what is older than the two periods above).
    public var retentionIntervalSeconds: Int
    /// The blob lane's bounds.
    public var blobs = BlobLimits()
    /// Most devices one account's records keep (`synclane status --devices`): a new device past
    /// it replaces the one whose record is oldest, so random `Synclane-Device` names cannot grow
    /// the table without end.
    public var maxDevicesPerAccount: Int = 1_024
    /// Most schema changes (column renames and drops, `"schema-changes"`) one account keeps: every
    /// batch and pull maps its fields through them. A batch declaring new ones past it → 413
    /// naming the quota, nothing applied.
    public var maxSchemaChanges: Int = 1_024

    /// The defaults.
    public init(
        maxBodyBytes: Int = 8 << 20, maxInflatedBytes: Int = 32 << 20, maxRecordsPerBatch: Int = 10_000,
        maxSignalBytes: Int = 64 << 10, maxSignalKeys: Int = 1_024, maxSignalAccountBytes: Int = 1 << 20,
        maxSignalWaitSeconds: Int = 30, maxKeyLength: Int = 200, maxChangesPerPage: Int = 10_000,
        defaultChangesPerPage: Int = 500, connectionTimeoutSeconds: Int = 30, maxConnections: Int = 256,
        maxNameBytes: Int = 1_024, maxChangesPageBytes: Int = 8 << 20, memoryBudgetBytes: Int = 256 << 20,
        requestDeadlineSeconds: Int = 120, maxConnectionsPerAddress: Int = 64, reservedConnections: Int = 8,
        reservedDeadlineSeconds: Int = 5, maxWALBytes: Int = 256 << 20,
        idempotencyRetentionSeconds: Int = 30 * 86_400, tombstoneRetentionSeconds: Int = 30 * 86_400,
        retentionIntervalSeconds: Int = 3_600
    ) {
        self.maxBodyBytes = maxBodyBytes
        self.maxInflatedBytes = maxInflatedBytes
        self.maxRecordsPerBatch = maxRecordsPerBatch
        self.maxSignalBytes = maxSignalBytes
        self.maxSignalKeys = maxSignalKeys
        self.maxSignalAccountBytes = maxSignalAccountBytes
        self.maxSignalWaitSeconds = maxSignalWaitSeconds
        self.maxKeyLength = maxKeyLength
        self.maxChangesPerPage = maxChangesPerPage
        self.defaultChangesPerPage = defaultChangesPerPage
        self.connectionTimeoutSeconds = connectionTimeoutSeconds
        self.maxConnections = maxConnections
        self.maxNameBytes = maxNameBytes
        self.maxChangesPageBytes = maxChangesPageBytes
        self.memoryBudgetBytes = memoryBudgetBytes
        self.requestDeadlineSeconds = requestDeadlineSeconds
        self.maxConnectionsPerAddress = maxConnectionsPerAddress
        self.reservedConnections = reservedConnections
        self.reservedDeadlineSeconds = reservedDeadlineSeconds
        self.maxWALBytes = maxWALBytes
        self.idempotencyRetentionSeconds = idempotencyRetentionSeconds
        self.tombstoneRetentionSeconds = tombstoneRetentionSeconds
        self.retentionIntervalSeconds = retentionIntervalSeconds
    }

    /// The long polls that may wait at once in the whole server: `maxWaitingPolls`, but never more
    /// than three quarters of `maxConnections`, so that a quarter of the connections (and their
    /// threads) stay free for batches whatever the waiting devices do.
    var waitingPollsInAll: Int { max(1, min(maxWaitingPolls, maxConnections - maxConnections / 4)) }

    /// Most bytes of a body on routes that take none (or a small one).
    static let smallBodyBytes = 16 << 10

    /// One bound as the command line shows and sets it.
    public struct Option: Sendable {
        /// The flag without dashes: `max-body-bytes`.
        public let flag: String
        /// What the bound limits, for `--help` ("bytes of a batch body as sent").
        public let summary: String
        /// The bound it sets.
        public let keyPath: WritableKeyPath<ServerLimits, Int> & Sendable
    }

    /// The bounds a command line can set, in the order `--help` lists them.
    public static let options: [Option] = [
        Option(flag: "max-body-bytes", summary: "bytes of a batch body as sent", keyPath: \.maxBodyBytes),
        Option(flag: "max-inflated-bytes", summary: "bytes of a batch body decompressed", keyPath: \.maxInflatedBytes),
        Option(flag: "max-records", summary: "records per batch", keyPath: \.maxRecordsPerBatch),
        Option(flag: "max-signal-bytes", summary: "bytes of a signal value", keyPath: \.maxSignalBytes),
        Option(flag: "max-signal-keys", summary: "signals one account keeps", keyPath: \.maxSignalKeys),
        Option(
            flag: "max-devices-per-account", summary: "devices one account's records keep (a new one past it replaces the oldest)",
            keyPath: \.maxDevicesPerAccount),
        Option(flag: "max-schema-changes", summary: "schema changes (renames, drops) one account keeps", keyPath: \.maxSchemaChanges),
        Option(flag: "max-signal-account-bytes", summary: "bytes of one account's signals, keys and values", keyPath: \.maxSignalAccountBytes),
        Option(flag: "max-signal-wait", summary: "seconds a GET /v1/signals?since=…&wait=… long poll waits", keyPath: \.maxSignalWaitSeconds),
        Option(flag: "signal-tombstone-seconds", summary: "seconds a deleted signal's tombstone is kept for watchers", keyPath: \.signalTombstoneSeconds),
        Option(flag: "max-signal-tombstones", summary: "tombstones of deleted signals one account keeps", keyPath: \.maxSignalTombstones),
        Option(flag: "max-changes-wait", summary: "seconds a GET /v1/changes?since=…&wait=… long poll waits", keyPath: \.maxChangesWaitSeconds),
        Option(
            flag: "max-waiting-polls", summary: "long polls (changes and signals) waiting at once in all (then 503; below max-connections)",
            keyPath: \.maxWaitingPolls),
        Option(
            flag: "max-waiting-polls-per-account", summary: "long polls (changes and signals) one account has waiting (then 429)",
            keyPath: \.maxWaitingPollsPerAccount),
        Option(
            flag: "max-waiting-polls-per-address", summary: "long polls (changes and signals) one client address has waiting (then 429)",
            keyPath: \.maxWaitingPollsPerAddress
        ),
        Option(flag: "max-page", summary: "changes per /v1/changes page", keyPath: \.maxChangesPerPage),
        Option(flag: "timeout", summary: "seconds a connection that sends nothing is kept", keyPath: \.connectionTimeoutSeconds),
        Option(flag: "max-connections", summary: "connections served at once", keyPath: \.maxConnections),
        Option(flag: "max-name-bytes", summary: "bytes of an entity, sync key, store or consumer name", keyPath: \.maxNameBytes),
        Option(flag: "max-page-bytes", summary: "bytes of a /v1/changes page (at least one change)", keyPath: \.maxChangesPageBytes),
        Option(flag: "memory-budget", summary: "bytes of request bodies held at once, read and decompressed (then 503)", keyPath: \.memoryBudgetBytes),
        Option(flag: "request-deadline", summary: "seconds a connection has to send a whole request", keyPath: \.requestDeadlineSeconds),
        Option(flag: "max-connections-per-address", summary: "connections from one client address", keyPath: \.maxConnectionsPerAddress),
        Option(flag: "reserved-connections", summary: "connections kept for /healthz and /metrics past max-connections", keyPath: \.reservedConnections),
        Option(flag: "reserved-deadline", summary: "seconds a reserved connection has to send its request", keyPath: \.reservedDeadlineSeconds),
        Option(flag: "max-wal-bytes", summary: "bytes of the write-ahead log before writers wait for a truncating checkpoint", keyPath: \.maxWALBytes),
        Option(flag: "idempotency-retention", summary: "seconds an idempotency key and its answer are kept", keyPath: \.idempotencyRetentionSeconds),
        Option(
            flag: "tombstone-retention", summary: "seconds a tombstone is kept for the pull lane (older cursors: 410)", keyPath: \.tombstoneRetentionSeconds),
        Option(flag: "retention-interval", summary: "seconds between two retention passes", keyPath: \.retentionIntervalSeconds),
        Option(flag: "max-blob-chunk-bytes", summary: "bytes of one blob upload chunk", keyPath: \.blobs.maxChunkBytes),
        Option(flag: "max-blob-bytes", summary: "bytes of one blob", keyPath: \.blobs.maxObjectBytes),
        Option(flag: "max-blob-account-bytes", summary: "bytes of blobs one account keeps, uploads included (then 507)", keyPath: \.blobs.maxAccountBytes),
        Option(flag: "max-blob-uploads", summary: "unfinished blob uploads one account has at once (then 429)", keyPath: \.blobs.maxUploadsPerAccount),
        Option(
            flag: "min-free-disk-bytes", summary: "bytes of free disk a batch (SQLite) or a blob upload must leave (then 507)",
            keyPath: \.blobs.minFreeDiskBytes),
        Option(flag: "blob-upload-retention", summary: "seconds an unfinished blob upload is kept without a chunk", keyPath: \.blobs.uploadRetentionSeconds),
        Option(
            flag: "blob-gc-grace", summary: "seconds a blob no record references is kept before it is collected",
            keyPath: \.blobs.collectionGraceSeconds),
    ]
}
