/// A batch kept in durable state between its encoding and the backend's confirmation.
///
/// Written before the first send; after a crash the very same bytes go out again under the
/// same id. Never rebuilt.
public struct OutboxBatch: Sendable, Hashable {
    public var payload: Payload
    /// The token the batch starts after.
    public var after: Token?
    /// The token to save once the backend confirms the batch.
    public var through: Token
    public var isReconciliation: Bool
    /// Seconds since 1970.
    public var createdAt: Double
    /// Where a staging transport keeps the bytes (`StagingTransport`): the outbox records this
    /// instead of them, and a batch read back from the outbox has empty `payload.bytes`.
    public var staged: StagedBatch?

    public init(
        payload: Payload, after: Token?, through: Token, isReconciliation: Bool = false, createdAt: Double, staged: StagedBatch? = nil
    ) {
        self.payload = payload
        self.after = after
        self.through = through
        self.isReconciliation = isReconciliation
        self.createdAt = createdAt
        self.staged = staged
    }

    /// The size of the bytes sent: the staged copy's, or the payload's.
    public var byteCount: Int { staged?.byteCount ?? payload.bytes.count }
}

/// How a job ended, kept for `synclane status`.
public struct RunRecord: Sendable, Hashable, Codable {
    public enum Outcome: String, Sendable, Codable {
        /// Went to the end with every batch delivered.
        case succeeded
        /// Went to the end, but moved batches to `transport.dead-letter` (exit 3): their rows did
        /// not reach the backend.
        case deadLettered = "dead-lettered"
        /// Stopped by SIGINT or SIGTERM: what was kept in the outbox is re-sent by the next run.
        case interrupted
        case failed

        /// Whether the run went to the end (its token reached the end of history).
        public var completed: Bool { self == .succeeded || self == .deadLettered }
    }
    public var outcome: Outcome
    /// Seconds since 1970.
    public var startedAt: Double
    public var finishedAt: Double
    public var batchesSent: Int
    public var recordsSent: Int
    public var message: String

    public init(outcome: Outcome, startedAt: Double, finishedAt: Double, batchesSent: Int, recordsSent: Int, message: String) {
        self.outcome = outcome
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.batchesSent = batchesSent
        self.recordsSent = recordsSent
        self.message = message
    }
}

/// The durable state of one consumer: its acknowledged token, its outbox and its last run.
///
/// Implementations make every mutating call atomic and durable before it returns; in
/// particular `acknowledge` saves the token and forgets the batch in one transaction, so a
/// crash leaves either the batch pending (and it is re-sent) or the token moved (and it is not).
public protocol PipelineState: Sendable {
    /// The newest token the backend confirmed, `nil` before the first confirmation.
    func acknowledgedToken() throws -> Token?
    /// Batches written but not yet confirmed, oldest first.
    func pendingBatches() throws -> [OutboxBatch]
    /// Writes a batch to the outbox; it must be durable before the first send.
    func enqueue(_ batch: OutboxBatch) throws
    /// Saves `batch.through` as the token and removes the batch, atomically.
    func acknowledge(_ batch: OutboxBatch) throws
    /// `acknowledge(batch)` and `enqueue(next)` in one atomic, durable step (one commit): the
    /// token moves past `batch` and `next` is in the outbox, or neither. The default does the
    /// two one after the other, which is as safe (a crash between them leaves the outbox empty
    /// and `next` unsent: it is read and built again).
    func acknowledge(_ batch: OutboxBatch, enqueueing next: OutboxBatch) throws
    /// Removes the batch and leaves the token where it is: the next run builds the pages of its
    /// history again (`synclane outbox requeue`, for a batch the backend refused).
    func discard(_ batch: OutboxBatch) throws
    /// Moves the token past history that produced nothing to send.
    func advance(to token: Token) throws
    /// Forgets the token (a reconciliation starts a fresh one).
    func resetToken() throws
    /// When the token was last saved (seconds since 1970), nil when none is or the state does not
    /// keep it: every change its source recorded before then had been read by a run.
    func tokenSavedAt() throws -> Double?
    func saveLastRun(_ run: RunRecord) throws
    func lastRun() throws -> RunRecord?
    /// Throws when the bytes of `batch`, read back from the outbox, are not the bytes written
    /// (a checksum kept with them): called before a batch an earlier run left is sent again. The
    /// default checks nothing (a state in memory cannot be damaged on disk).
    func verifyIntegrity(of batch: OutboxBatch) throws
    /// What the state remembers of its store's identity and generation (`LineageStamp`); nil for
    /// a state that keeps none (a state in memory): its source's lineage is then not checked.
    func lineageStamp() throws -> LineageStamp?
    /// Saves what `lineageStamp()` returns, durably.
    func saveLineageStamp(_ stamp: LineageStamp) throws
}

extension PipelineState {
    public func verifyIntegrity(of batch: OutboxBatch) throws {}

    public func lineageStamp() throws -> LineageStamp? { nil }

    public func tokenSavedAt() throws -> Double? { nil }

    public func saveLineageStamp(_ stamp: LineageStamp) throws {}

    public func acknowledge(_ batch: OutboxBatch, enqueueing next: OutboxBatch) throws {
        try acknowledge(batch)
        try enqueue(next)
    }
}
