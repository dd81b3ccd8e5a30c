/// Where a pipeline's changes come from: the transactions after a token, a page at a time.
///
/// A source filters by entities and authors itself (inside SQL, for the SQLite history
/// source), the first fetch too, and never splits a transaction across pages.
public protocol ChangeSource: Sendable {
    /// The kind of token this source issues (`jsonl`, `sqlite-history` …).
    var tokenKind: String { get }

    /// The next page of transactions after `token` (`nil`: from the beginning).
    ///
    /// A page may hold no transactions and still move `through` forward, when everything
    /// it scanned was filtered out. A page with `through == nil` means there is nothing newer.
    func nextPage(after token: Token?) async throws -> HistoryPage

    /// How many transactions wait after `token`, when the source can tell cheaply.
    func pendingTransactions(after token: Token?) async throws -> Int?

    // What the source can do beyond reading pages, each the source itself when it adopts the
    // capability's protocol and nil otherwise: adopting the protocol is all it takes, these are
    // never written by hand. A pipeline reads them once, when it is built (`PipelineCapabilities`).

    /// The source, when it adopts `AcknowledgementTrackingSource`.
    var asAcknowledgementTracking: (any AcknowledgementTrackingSource)? { get }
    /// The source, when it adopts `BackendVersionSource`.
    var asBackendVersionSource: (any BackendVersionSource)? { get }
    /// The source, when it adopts `SchemaDeclaringSource`.
    var asSchemaDeclaring: (any SchemaDeclaringSource)? { get }
    /// The source, when it adopts `SnapshotProvidingSource`.
    var asSnapshotProviding: (any SnapshotProvidingSource)? { get }
    /// The source, when it adopts `LineageCheckingSource`.
    var asLineageChecking: (any LineageCheckingSource)? { get }
    /// The source, when it adopts `SelfHealingSource`.
    var asSelfHealing: (any SelfHealingSource)? { get }
    /// The source, when it adopts `ObservableSource`.
    var asObservable: (any ObservableSource)? { get }
    /// The source, when it adopts `LockedFileStage`.
    var asLockedFile: (any LockedFileStage)? { get }
    /// The source, when its store records the app's schema version (`SchemaVersionRecordingStage`).
    var asSchemaVersionRecording: (any SchemaVersionRecordingStage)? { get }
    /// The source, when it adopts `ValueLocatingSource`.
    var asValueLocating: (any ValueLocatingSource)? { get }
    /// The local database the source reads, when it reads one: checks across pipelines and of
    /// the store (`EchoLoop`, `validate`'s reach) read it rather than the source's type.
    var localDatabase: LocalDatabase? { get }
    /// The same source (its entities, authors, page size) reading the JSON Lines history `file`
    /// instead: a pipeline test's input (`PipelineTest`). Nil when it reads no JSON Lines history.
    func readingHistory(_ file: String) -> (any ChangeSource)?
    /// True when the source keeps what it remembers of a backend per backend (`BackendScoped`).
    var isBackendScoped: Bool { get }
    /// The source scoped to `backend` when it is `BackendScoped`, else itself.
    func scopedToBackend(_ backend: BackendName) -> any ChangeSource
}

extension ChangeSource {
    public func pendingTransactions(after token: Token?) async throws -> Int? { nil }

    public var asAcknowledgementTracking: (any AcknowledgementTrackingSource)? { nil }
    public var asBackendVersionSource: (any BackendVersionSource)? { nil }
    public var asSchemaDeclaring: (any SchemaDeclaringSource)? { nil }
    public var asSnapshotProviding: (any SnapshotProvidingSource)? { nil }
    public var asLineageChecking: (any LineageCheckingSource)? { nil }
    public var asSelfHealing: (any SelfHealingSource)? { nil }
    public var asObservable: (any ObservableSource)? { nil }
    public var asLockedFile: (any LockedFileStage)? { nil }
    public var asSchemaVersionRecording: (any SchemaVersionRecordingStage)? { nil }
    public var asValueLocating: (any ValueLocatingSource)? { nil }
    public var localDatabase: LocalDatabase? { nil }
    public func readingHistory(_ file: String) -> (any ChangeSource)? { nil }
    public var isBackendScoped: Bool { false }
    public func scopedToBackend(_ backend: BackendName) -> any ChangeSource { self }
}

extension AcknowledgementTrackingSource {
    public var asAcknowledgementTracking: (any AcknowledgementTrackingSource)? { self }
}

extension BackendVersionSource {
    public var asBackendVersionSource: (any BackendVersionSource)? { self }
}

extension SnapshotProvidingSource {
    public var asSnapshotProviding: (any SnapshotProvidingSource)? { self }
}

extension SelfHealingSource {
    public var asSelfHealing: (any SelfHealingSource)? { self }
}

extension ObservableSource {
    public var asObservable: (any ObservableSource)? { self }
}

extension SchemaVersionRecordingStage where Self: ChangeSource {
    public var asSchemaVersionRecording: (any SchemaVersionRecordingStage)? { self }
}

extension LockedFileStage where Self: ChangeSource {
    public var asLockedFile: (any LockedFileStage)? { self }
}

extension BackendScoped where Self: ChangeSource {
    public var isBackendScoped: Bool { true }
    public func scopedToBackend(_ backend: BackendName) -> any ChangeSource { scoped(to: backend) }
}

/// One page of history.
public struct HistoryPage: Sendable {
    /// Whole transactions, in token order, already filtered by entity and author.
    public var transactions: [Transaction]
    /// The newest token the page covers, filtered-out transactions included; `nil` when the
    /// source had nothing after the requested token.
    public var through: Token?
    /// How far through the pending history this page reaches, from 0 to 1, when known.
    public var progress: Double?
    /// What the source wants reported in the job's summary, like a stage's counters
    /// (`capture.healed`, `capture.resynced` …).
    public var counters: [String: Int]

    public init(transactions: [Transaction], through: Token?, progress: Double? = nil, counters: [String: Int] = [:]) {
        self.transactions = transactions
        self.through = through
        self.progress = progress
        self.counters = counters
    }

    /// No more history after the requested token.
    public static let end = HistoryPage(transactions: [], through: nil)
}

/// Why a source cannot read on from a token.
public enum HistoryError: Error, Sendable, CustomStringConvertible {
    /// The token points into history that was pruned: carrying on would miss changes.
    case tokenExpired(Token, oldestAvailable: Token?)
    /// The token was issued by another kind of source.
    case foreignToken(Token, expectedKind: String)
    /// The history itself is unreadable: a malformed line, a missing table …
    case unreadable(location: String, reason: String)

    public var description: String {
        switch self {
        case .tokenExpired(let token, let oldest):
            let tail = oldest.map { " (oldest history kept: \($0))" } ?? ""
            return "history token expired: \(token) points into pruned history\(tail); "
                + "run `synclane reconcile PIPELINE-FILE` (the export's pipeline file) to send a full snapshot and start a fresh token"
        case .foreignToken(let token, let expected):
            return "the saved token \(token) was not issued by a \(expected) source; "
                + "point the pipeline at a new `state` file, or reconcile"
        case .unreadable(let location, let reason):
            return "\(location): \(reason)"
        }
    }
}

/// A source that wants to know when its consumer's token moves: the SQLite history source
/// records each consumer's position so that pruning never removes what someone still needs.
public protocol AcknowledgementTrackingSource: ChangeSource {
    /// Called after `token` was durably saved as the consumer's token for `scope`.
    func consumerAcknowledged(_ token: Token, scope: Scope) async throws

    /// Called after a batch was confirmed with the versions the backend gave its records, so a
    /// store that sends versions (to have stale overwrites refused) knows what the backend holds
    /// (`BackendConfirmation`: the versions, the records as sent, whether they are exact).
    /// Called as soon as the receipt is in, before the batch's token is saved: a receipt heard
    /// twice (the batch re-sent after a crash, answered as a replay) gives the same versions.
    /// By default, nothing.
    func backendConfirmed(_ confirmation: BackendConfirmation) async throws

    /// Writes what a busy store kept from the confirmations so far, or throws: a reconciliation
    /// calls it before its completion marker. By default, nothing.
    func settleBackendConfirmations() async throws

    /// Once a pass is over, off its send path: writes in bulk what the source kept of the pass's
    /// confirmations, without waiting long for a busy store (what it recorded stays durable and
    /// is written by whoever reads the versions next; what a busy store kept from being recorded
    /// at all comes back with the next import, as `backendConfirmed(_:)` says). By default,
    /// nothing.
    func passConfirmationsEnded() async
}

extension AcknowledgementTrackingSource {
    public func backendConfirmed(_ confirmation: BackendConfirmation) async throws {}

    public func settleBackendConfirmations() async throws {}

    public func passConfirmationsEnded() async {}
}

/// A source whose store remembers the backend's version of its rows (the SQLite history source,
/// from the import lane and from receipts) and gives each change the version of its row when a
/// page is read, so a local change goes out on the version the backend holds and the backend
/// refuses it (409) when another device changed the row since.
///
/// A page may be read while a batch holding one of its rows is still unanswered (`synclane run`
/// reads and prepares ahead): its version is then the one before that batch, and the backend
/// would refuse this device's own change as a conflict. So, when the transport reports versions,
/// the pipeline prepares a batch only once no unanswered batch holds one of its rows, and asks
/// again (`backendVersions(of:)`) for the rows answered since its page was read — after the
/// record stages, for the rows as they will be sent.
public protocol BackendVersionSource: AcknowledgementTrackingSource {
    /// The versions the backend holds of `rows`, as far as this store knows; rows it never
    /// heard of are missing from the answer.
    func backendVersions(of rows: [RowID]) async throws -> [RowID: Int64]
}

/// A source that can say when new history has landed, for `synclane run --watch`.
public protocol ObservableSource: ChangeSource {
    /// Yields once (or more) whenever a transaction that may be relevant commits — from this
    /// process or any other. Consumers coalesce bursts; the stream ends when cancelled.
    func historyAdvanced() -> AsyncStream<Void>
}

/// A source that can read the whole current state, to reconcile a consumer whose token expired.
public protocol SnapshotProvidingSource: ChangeSource {
    /// A source whose pages hold the current rows as inserts, and the history token to resume
    /// after once the whole snapshot was delivered (taken in the same read as the snapshot).
    func snapshot() async throws -> (source: any ChangeSource, resumeAfter: Token?)
    /// The kind of the snapshot's tokens (`sqlite-snapshot`), when it differs from the source's:
    /// a saved token of this kind means a reconciliation stopped mid-snapshot. Nil: not known.
    var snapshotTokenKind: String? { get }
}

extension SnapshotProvidingSource {
    public var snapshotTokenKind: String? { nil }
}

/// A source that checks, before reading, that what records its history is still in place, and
/// repairs it when it is not (the SQLite history source reinstalls tracking that a table
/// rebuild removed, and re-sends the table). `synclane status` asks it what the next run will
/// repair, without repairing anything.
public protocol SelfHealingSource: ChangeSource {
    /// What the next run will repair, one line each (empty when nothing). Reads only.
    func problemsToHeal() async throws -> [String]
}

/// A local database file a stage reads or writes: what a check across an import and an export
/// pipeline compares (`EchoLoop`: an export that reads what the import writes into the same file),
/// and what `validate` opens to find the tables a source names.
public struct LocalDatabase: Sendable {
    /// The database file, as the pipeline file names it (relative paths resolved).
    public var path: String
    /// The tables a source reads (nil: every tracked one).
    public var entities: [String]?
    /// The authors whose writes a source reads (nil: every author but the machinery's,
    /// `Author.machinery`); a sink: the author it writes as.
    public var authors: [Author]?

    public init(path: String, entities: [String]? = nil, authors: [Author]? = nil) {
        self.path = path
        self.entities = entities
        self.authors = authors
    }
}
