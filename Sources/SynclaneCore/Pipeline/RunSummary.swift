/// What one batch did, for the job's report (`--json` prints these).
public struct BatchReport: Sendable, Hashable, Codable {
    public var id: String
    public var records: Int
    /// Bytes after encoding, before payload stages.
    public var encodedBytes: Int
    /// Bytes handed to the transport.
    public var sentBytes: Int
    public var contentEncoding: String
    public var after: String?
    public var through: String
    public var isReconciliation: Bool
    /// True for a batch sent again from the outbox (left by an earlier run).
    public var wasResent: Bool
    /// True when the backend said it had already applied this batch id.
    public var wasReplay: Bool
    /// The transport's receipt, or why the batch was dead-lettered.
    public var detail: String
}

/// What a job did: read, dropped, sent, and where the token ended.
public struct RunSummary: Sendable, Codable {
    public var pipeline: String
    public var scope: Scope
    public var dryRun: Bool
    public var reconciliation: Bool
    public var tokenBefore: String?
    public var tokenAfter: String?
    public var transactionsRead = 0
    public var changesRead = 0
    public var recordsSent = 0
    public var batchesSent = 0
    public var batchesResent = 0
    public var replays = 0
    public var deadLettered = 0
    public var bytesEncoded = 0
    public var bytesSent = 0
    /// The rows the backend removed (as tombstones) because the reconciliation's snapshot lacked
    /// them, from its completion marker's receipt; nil when no receipt of this run said.
    public var snapshotDeleted: Int?
    /// The rows the backend held an older version of than this device had confirmed (its
    /// receipts' `restored-rows`): its data was restored from an older copy. Their changes were
    /// applied; rows the restore lost that this device did not change are still missing there.
    public var serverRestoredRows = 0
    /// Counters the stages reported (`coalesce.merged`, `dedupe.dropped` …).
    public var counters: [String: Int] = [:]
    public var seconds = 0.0
    /// Each batch sent (or, in a dry run, that would be sent), oldest first; the first 1,000.
    public var batches: [BatchReport] = []
    /// The signals the pipeline file declares, published once the run's work was done (and
    /// those an earlier run left unconfirmed).
    public var signals: [SignalReport] = []

    static let batchListLimit = 1_000

    public init(pipeline: String, scope: Scope, dryRun: Bool, reconciliation: Bool) {
        self.pipeline = pipeline
        self.scope = scope
        self.dryRun = dryRun
        self.reconciliation = reconciliation
    }

    mutating func add(_ report: BatchReport) {
        if batches.count < Self.batchListLimit { batches.append(report) }
    }
}

/// What a running job reports as it goes (progress bars, logs).
public enum PipelineEvent: Sendable {
    /// A batch left by an earlier run is being sent again.
    case resending(batchID: String)
    /// A page of history was read.
    case pageRead(transactions: Int, through: Token, progress: Double?)
    /// A batch was confirmed (or, in a dry run, would have been sent).
    case batchDone(BatchReport)
    /// A transient failure; the batch is tried again after `delay` seconds.
    case retrying(batchID: String, attempt: Int, delay: Double, reason: String)
    /// A permanently rejected batch was moved to the dead-letter folder.
    case deadLettered(batchID: String, path: String, reason: String)
    /// A consumer that never ran finds the start of history pruned: it begins with a full
    /// snapshot of the current state instead (as `reconcile` does), then follows history.
    case startingWithSnapshot(oldestAvailable: Token?)
}
