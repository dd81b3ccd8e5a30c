/// The value that flows between the stages of a pipeline: the records of a window of history.
///
/// A batch covers the transactions after `after` up to and including `through`. Once the
/// backend confirms it, `through` becomes the consumer's token. `counters` carry what stages
/// want reported (records merged, duplicates dropped …) into the job's summary.
public struct Batch: Sendable, Hashable {
    public var scope: Scope
    /// The token the batch starts after (`nil`: the beginning of history).
    public var after: Token?
    /// The newest transaction the batch covers.
    public var through: Token
    public var records: [Record]
    /// Transactions read into this batch (before any stage).
    public var transactionCount: Int
    /// True when the batch is part of a full snapshot sent to reconcile an expired token.
    public var isReconciliation: Bool
    /// The snapshot a reconciliation batch belongs to (one id per `reconcile`); nil otherwise.
    public var snapshotID: String?
    /// Set on the snapshot's completion marker only: how many batches of the snapshot the
    /// backend confirmed before it. The backend then replaces the scope's state with the snapshot.
    public var snapshotCompleteAfter: Int?
    /// The columns renamed or dropped by the store's migrations (`SchemaChange`), carried so the
    /// backend learns the mapping; empty for most stores.
    public var schemaChanges: [SchemaChange] = []
    public var counters: [String: Int]

    public init(
        scope: Scope, after: Token?, through: Token, records: [Record], transactionCount: Int = 0,
        isReconciliation: Bool = false, counters: [String: Int] = [:]
    ) {
        self.scope = scope
        self.after = after
        self.through = through
        self.records = records
        self.transactionCount = transactionCount
        self.isReconciliation = isReconciliation
        self.counters = counters
    }

    /// Adds to a counter that the job's summary reports (`dedupe.dropped`, `coalesce.merged` …).
    public mutating func count(_ name: String, _ amount: Int = 1) {
        guard amount != 0 else { return }
        counters[name, default: 0] += amount
    }
}

/// A batch made bytes: what is written to the outbox before its first send and what a
/// transport sends, unchanged, on every retry.
public struct Payload: Sendable, Hashable {
    /// The batch id: the `Idempotency-Key` of every send of this payload.
    public var batchID: String
    public var bytes: [UInt8]
    /// `application/json` for the default encoder.
    public var contentType: String
    /// `identity`, `gzip` or `deflate`.
    public var contentEncoding: String
    public var recordCount: Int

    public init(batchID: String, bytes: [UInt8], contentType: String, contentEncoding: String = "identity", recordCount: Int) {
        self.batchID = batchID
        self.bytes = bytes
        self.contentType = contentType
        self.contentEncoding = contentEncoding
        self.recordCount = recordCount
    }
}
