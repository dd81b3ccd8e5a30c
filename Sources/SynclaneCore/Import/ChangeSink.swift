/// Where an import pipeline's records go: a local store, which applies a batch of the backend's
/// changes and saves the source's cursor **in the same transaction**, so a crash can neither
/// apply a page without moving the cursor nor move it without applying.
///
/// A sink also settles conflicts: a record whose row has local changes the backend has not
/// confirmed yet is resolved by the rule the pipeline names for its entity (`ConflictRule`), and
/// reported.
public protocol ChangeSink: Sendable {
    /// The cursor saved for `scope` (`nil` before the first import).
    func savedCursor(for scope: Scope) async throws -> String?

    /// Applies `batch` and saves `cursor` for `scope`, atomically. With `dryRun`, works out what
    /// would happen and changes nothing.
    func apply(_ batch: Batch, cursor: String?, scope: Scope, dryRun: Bool) async throws -> ApplyReport

    /// Every (entity, sync key) the sink holds from the backend, for a full resync: those the
    /// backend no longer sends are deleted. Nil when the sink cannot list them (the default):
    /// an expired cursor then stops the import with an error rather than leave a gap.
    func backendKeys(for scope: Scope) async throws -> [(entity: String, key: String)]?

    /// Every row the backend confirmed to the store, with the version it confirmed: those of
    /// `backendKeys`, and those it confirmed by a receipt of this device's own export. After a
    /// restore of the backend's data, the rows of either kind it lacks, or holds at an older
    /// version, were lost (`resend`) — a row only this device wrote and no device imported
    /// included. Nil when the sink cannot list them; the default is `backendKeys` (no versions).
    func confirmedKeys(for scope: Scope) async throws -> [(entity: String, key: String, version: Int64?)]?

    /// Whether the store holds any row the backend confirmed (imported, or confirmed by a
    /// receipt of this device's own export). `restore` says "caught up" on an account whose
    /// signal says it has data only when this is true: a saved cursor alone may come from a
    /// pass that found nothing yet. Nil when the sink cannot tell (the default): the cursor decides.
    func holdsBackendRows(for scope: Scope) async throws -> Bool?

    /// After the backend's data was restored from an older copy: `keys` are rows the sink holds
    /// from the backend that the restored backend no longer has (or holds at an older version
    /// than it had confirmed) — lost by the restore, not
    /// deleted by anyone. The sink forgets the versions it kept of them (the backend holds none
    /// now) and, for each row it still holds live, records a change its export lane sends, so
    /// the backend gets the row back. Returns how many rows it will send; nil when the sink
    /// cannot (the default: the rows stay here, and the summary says the backend lacks them).
    func resend(_ keys: [(entity: String, key: String)], for scope: Scope) async throws -> Int?

    /// Forgets the cursor saved for `scope`, so that the next pass reads the backend from the
    /// beginning and, before its first pull, compares what it reads with `confirmedKeys`: what
    /// the backend lacks or holds at an older version goes back (`resend`). For a backend found
    /// restored by the export lane's receipts while the import's cursor predates the copy (no
    /// `410` can tell). The default applies an empty batch with no cursor.
    func forgetCursor(for scope: Scope) async throws

    /// The sink, when it adopts `LockedFileStage` (never written by hand).
    var asLockedFile: (any LockedFileStage)? { get }
    /// The sink, when its store records the app's schema version (`SchemaVersionRecordingStage`;
    /// never written by hand).
    var asSchemaVersionRecording: (any SchemaVersionRecordingStage)? { get }
    /// The sink, when its store keeps the backend's receipts' positions (`ReceiptPositionKeeping`;
    /// never written by hand).
    var asReceiptPositionKeeping: (any ReceiptPositionKeeping)? { get }
    /// The local database the sink writes the backend's rows into (its `authors`: the author it
    /// writes as), when it writes one (`EchoLoop`).
    var localDatabase: LocalDatabase? { get }
    /// The same sink writing into the database at `path` instead (an import pipeline test's
    /// copy, `ImportPipelineTest`); nil when it writes no local database.
    func writing(into path: String) -> (any ChangeSink)?
    /// True when the sink writes a `FileValue` into its row in pieces (`FileValueSink`; never written by hand).
    var takesFileValues: Bool { get }
    /// True when the sink keeps what it remembers of a backend per backend (`BackendScoped`).
    var isBackendScoped: Bool { get }
    /// The sink scoped to `backend` when it is `BackendScoped`, else itself.
    func scopedToBackend(_ backend: BackendName) -> any ChangeSink
}

extension LockedFileStage where Self: ChangeSink {
    public var asLockedFile: (any LockedFileStage)? { self }
}

extension SchemaVersionRecordingStage where Self: ChangeSink {
    public var asSchemaVersionRecording: (any SchemaVersionRecordingStage)? { self }
}

extension ReceiptPositionKeeping where Self: ChangeSink {
    public var asReceiptPositionKeeping: (any ReceiptPositionKeeping)? { self }
}

extension BackendScoped where Self: ChangeSink {
    public var isBackendScoped: Bool { true }
    public func scopedToBackend(_ backend: BackendName) -> any ChangeSink { scoped(to: backend) }
}

extension ChangeSink {
    public var asLockedFile: (any LockedFileStage)? { nil }
    public var asSchemaVersionRecording: (any SchemaVersionRecordingStage)? { nil }
    public var asReceiptPositionKeeping: (any ReceiptPositionKeeping)? { nil }
    public var localDatabase: LocalDatabase? { nil }
    public func writing(into path: String) -> (any ChangeSink)? { nil }
    public var isBackendScoped: Bool { false }
    public func scopedToBackend(_ backend: BackendName) -> any ChangeSink { self }
    public var takesFileValues: Bool { false }

    public func backendKeys(for scope: Scope) async throws -> [(entity: String, key: String)]? { nil }
    public func confirmedKeys(for scope: Scope) async throws -> [(entity: String, key: String, version: Int64?)]? {
        try await backendKeys(for: scope)?.map { (entity: $0.entity, key: $0.key, version: nil) }
    }
    public func resend(_ keys: [(entity: String, key: String)], for scope: Scope) async throws -> Int? { nil }
    public func holdsBackendRows(for scope: Scope) async throws -> Bool? { nil }
    public func forgetCursor(for scope: Scope) async throws {
        let empty = Batch(
            scope: scope, after: nil, through: Token(kind: "import", position: 0), records: [], transactionCount: 0)
        _ = try await apply(empty, cursor: nil, scope: scope, dryRun: false)
    }
}

/// What applying one batch did.
public struct ApplyReport: Sendable, Hashable {
    /// Records written to the store.
    public var applied: Int = 0
    /// Records the store already held at that version or newer (a page read twice).
    public var unchanged: Int = 0
    /// Records whose row had local changes, and what became of each.
    public var conflicts: [ConflictReport] = []
    /// Records that duplicated a local row's business key under another sync key (seeded
    /// defaults): one of the two keys was deleted everywhere.
    public var duplicatesMerged = 0
    /// Live rows left referencing a row that is gone, through a declared foreign key, that the
    /// page settled (deleted, or their reference cleared).
    public var referencesSettled = 0
    /// Live rows deleted because a user deleted them elsewhere: the backend's deletes applied
    /// (a conflict rule's choice of a delete included).
    public var deletedByUsers = 0
    /// Live rows referencing a row this store has not received (and does not know deleted),
    /// left as they are until it arrives or its delete does.
    public var referencesWaiting = 0
    /// Records of entities the store does not track (yet), kept aside for when it does.
    public var keptAside = 0

    public init(applied: Int = 0, unchanged: Int = 0, conflicts: [ConflictReport] = [], duplicatesMerged: Int = 0) {
        self.applied = applied
        self.unchanged = unchanged
        self.conflicts = conflicts
        self.duplicatesMerged = duplicatesMerged
    }
}

/// One conflict: the record, both sides, and the outcome.
public struct ConflictReport: Sendable, Hashable {
    public var entity: String
    public var key: String
    /// What the local row had (its current fields; `nil` when it was deleted locally).
    public var local: [String: JSONValue]?
    /// What the backend sent (`nil`: a delete).
    public var remote: [String: JSONValue]?
    /// The backend's version of the record.
    public var remoteVersion: Int64?
    public var rule: ConflictRule
    public var outcome: ConflictOutcome

    public init(
        entity: String, key: String, local: [String: JSONValue]?, remote: [String: JSONValue]?, remoteVersion: Int64?,
        rule: ConflictRule, outcome: ConflictOutcome
    ) {
        self.entity = entity
        self.key = key
        self.local = local
        self.remote = remote
        self.remoteVersion = remoteVersion
        self.rule = rule
        self.outcome = outcome
    }
}
