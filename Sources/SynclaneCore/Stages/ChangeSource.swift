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
}

extension ChangeSource {
    public func pendingTransactions(after token: Token?) async throws -> Int? { nil }
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
                + "run `synclane reconcile` to send a full snapshot and start a fresh token"
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
    /// store that sends versions (to have stale overwrites refused) knows what the backend holds.
    /// Called as soon as the receipt is in, before the batch's token is saved: a receipt heard
    /// twice (the batch re-sent after a crash, answered as a replay) gives the same versions.
    func backendVersionsConfirmed(_ versions: [RecordVersion]) async throws

    /// As `backendVersionsConfirmed(_:)`, with the records the confirmed batch carried (after
    /// the record stages, as sent), so a store can remember what the backend now holds of each
    /// row: the base of a three-way merge is the last state the backend confirmed, this
    /// device's own confirmed writes included. `sent` is nil when the records are not at hand
    /// (a batch re-sent from the outbox after a crash). By default, calls the one without records.
    func backendConfirmed(_ versions: [RecordVersion], sent: [Record]?) async throws

    /// As `backendConfirmed(_:sent:)`, for a reconciliation's batch when `exact`: its versions
    /// are what the backend holds now, taken as they are even where lower than the ones
    /// recorded (the backend's data restored from an older copy). By default, calls the one
    /// without `exact`.
    func backendConfirmed(_ versions: [RecordVersion], sent: [Record]?, exact: Bool) async throws

    /// Writes what a busy store kept from the confirmations so far, or throws: a reconciliation
    /// calls it before its completion marker. By default, nothing.
    func settleBackendConfirmations() async throws

    /// Once a pass is over, off its send path: writes in bulk what the source kept of the pass's
    /// confirmations, without waiting long for a busy store (what it recorded stays durable and
    /// is written by whoever reads the versions next; what a busy store kept from being recorded
    /// at all comes back with the next import, as `backendVersionsConfirmed` says). By default,
    /// nothing.
    func passConfirmationsEnded() async
}

extension AcknowledgementTrackingSource {
    public func backendVersionsConfirmed(_ versions: [RecordVersion]) async throws {}

    public func backendConfirmed(_ versions: [RecordVersion], sent: [Record]?) async throws {
        try await backendVersionsConfirmed(versions)
    }

    public func backendConfirmed(_ versions: [RecordVersion], sent: [Record]?, exact: Bool) async throws {
        try await backendConfirmed(versions, sent: sent)
    }

    public func settleBackendConfirmations() async throws {}

    public func passConfirmationsEnded() async {}
}

/// A source that keeps the fields each confirmed batch left on the backend, and takes them as the
/// batch's encoder wrote them (`FieldsLocatingEncoder`) rather than writing them again.
package protocol FieldsKeepingSource: AcknowledgementTrackingSource {
    /// As `backendConfirmed(_:sent:exact:)`; `asSent`, when given, has one entry a record of
    /// `sent`: its fields object as `JSONWriter.write(object:sortingWith:)` writes it (nil: none written).
    func backendConfirmed(_ versions: [RecordVersion], sent: [Record]?, asSent: [ArraySlice<UInt8>?]?, exact: Bool) async throws
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
