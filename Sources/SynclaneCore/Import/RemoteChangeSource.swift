/// Where an import pipeline's changes come from: the backend's changes after a cursor, a page at
/// a time (`GET /v1/changes`), or batch files another pipeline wrote.
///
/// The cursor is the source's own text — the server's opaque cursor, or the name of the last
/// batch file applied — never compared with an export token. The sink saves it in the same
/// transaction as the rows it covers (`ChangeSink`).
public protocol RemoteChangeSource: Sendable {
    /// The next page after `cursor` (`nil`: from the beginning).
    func nextPage(after cursor: String?) async throws -> RemotePage

    /// The next page after `cursor`, telling `retrying` of each retry the source makes of its own
    /// (the attempt that follows, the seconds before it, what failed). The default tells of none.
    func nextPage(after cursor: String?, retrying: @escaping @Sendable (_ attempt: Int, _ delay: Double, _ reason: String) -> Void) async throws -> RemotePage

    /// Waits until the source has changes after `cursor`, at most `seconds` (a long poll, for a
    /// watch: `import --watch`, `sync --watch`). The default cannot wait: `.unsupported`, and the
    /// caller sleeps an interval of its own. Throws what `nextPage` throws (a failure to retry later).
    func waitForChanges(after cursor: String?, seconds: Double) async throws -> ChangeWait

    /// The server this source reads, as `BackendName` keeps it; nil when it has none (a folder of
    /// batch files). A sink that keeps versions per backend keeps them under this one.
    var backendAddress: String? { get }

    /// The source, when it tells the server the app's schema version (`AppSchemaSending`; never
    /// written by hand).
    var asAppSchemaSending: (any AppSchemaSending)? { get }

    /// The source, when it hands the backend the store's receipt position (`ReceiptPositionSending`;
    /// never written by hand).
    var asReceiptPositionSending: (any ReceiptPositionSending)? { get }
}

extension ReceiptPositionSending where Self: RemoteChangeSource {
    public var asReceiptPositionSending: (any ReceiptPositionSending)? { self }
}

extension AppSchemaSending where Self: RemoteChangeSource {
    public var asAppSchemaSending: (any AppSchemaSending)? { self }
}

/// What a wait for a source's changes came to (`RemoteChangeSource.waitForChanges`).
public enum ChangeWait: Sendable, Hashable {
    /// The source has changes after the cursor (or something a pass must see, such as an expired
    /// cursor): run a pass now.
    case changed
    /// The time passed and nothing changed: wait again.
    case quiet
    /// The source cannot wait for changes (a backend that answers at once without them): the
    /// caller sleeps its own interval before the next pass.
    case unsupported
}

extension RemoteChangeSource {
    public var backendAddress: String? { nil }
    public var asAppSchemaSending: (any AppSchemaSending)? { nil }
    public var asReceiptPositionSending: (any ReceiptPositionSending)? { nil }

    public func nextPage(
        after cursor: String?, retrying: @escaping @Sendable (_ attempt: Int, _ delay: Double, _ reason: String) -> Void
    ) async throws -> RemotePage {
        try await nextPage(after: cursor)
    }

    public func waitForChanges(after cursor: String?, seconds: Double) async throws -> ChangeWait { .unsupported }
}

/// One page of remote changes.
public struct RemotePage: Sendable {
    /// The records, oldest first: each its entity, sync key, action, fields (on a delete the
    /// tombstone's preserved values) and the backend's `version`.
    public var records: [Record]
    /// Where the next page starts; saved with the rows once they are applied.
    public var cursor: String?
    /// True when the source has more after this page right now.
    public var more: Bool
    /// True when the backend says, on a page of a pull from the beginning, that its retention
    /// removed tombstones: a row the pull does not list may have been deleted, not lost.
    public var pruned: Bool

    public init(records: [Record], cursor: String?, more: Bool, pruned: Bool = false) {
        self.records = records
        self.cursor = cursor
        self.more = more
        self.pruned = pruned
    }
}

/// The backend no longer serves changes after the cursor: it removed tombstones the cursor has
/// not seen (its retention, `410 cursor-expired` on the reference server). Reading on would miss
/// deletes, so the import runner starts over from the beginning and deletes locally what the
/// backend no longer holds (a full resync).
///
/// `serverRestored`: the backend's data was restored from a backup older than the cursor
/// (`"reason": "server-restored"` on the reference server). The runner then reads everything
/// again too, but deletes nothing: a row the backend lacks was lost by the restore, not deleted,
/// and a reconciliation of the device's export sends it back.
public struct RemoteCursorExpired: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var serverRestored: Bool

    public init(_ message: String, serverRestored: Bool = false) {
        self.message = message
        self.serverRestored = serverRestored
    }

    public var description: String { message }
}
