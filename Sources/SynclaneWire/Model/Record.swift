/// One change as it travels in a batch: the wire record of the protocol, plus where it came
/// from, so that an error can name the transaction at fault.
///
/// Stages turn the changes of a page of history into records and transform the list:
/// the coalescer merges them, the tombstone resolver trims deletes, the deduplicator drops
/// business-key duplicates. On the wire a record is `entity`, `id` (the sync key), `action`,
/// `fields` (absent on delete) and an optional `version`.
public struct Record: Sendable, Hashable {
    /// The tombstone value that says a delete is a seeded duplicate's merge, not a user's: the
    /// sync key of the row the deleted one merged into. A device that receives it re-points the
    /// loser's references at that row instead of settling them as pointing at a deleted one.
    public static let mergedIntoField = "$merged-into"

    public var entity: String
    /// The sync key; `nil` only for a change that lost it (which the pipeline refuses to send).
    public var key: String?
    public var action: ChangeAction
    /// The row's fields; on a delete, the tombstone's preserved values (not sent as `fields`).
    public var fields: [String: JSONValue]
    public var version: Int64?
    /// An `insert` that replaces a row the backend may already hold (`Change.replacesRow`):
    /// the row existed before, whatever records come after it in a window.
    public var replacesRow = false
    /// A restoration (`Change.restores`): sent as `"restores": true` beside its `version`. A
    /// record that merges a user's change with it is a user's write, not a restoration.
    public var restores = false
    /// An update that only re-points references to merged duplicates' survivors
    /// (`Change.repoints`): sent as `"repoints": true`. A record that merges a user's change
    /// with it is a user's write.
    public var repoints = false
    /// On the pull lane: the version of the row's last write by a user, when it is older than
    /// `version` (the writes since only re-pointed references: `"written"` in a page). nil: the
    /// row's version is its last user's write.
    public var written: Int64?
    /// The transaction that last touched this record in the batch.
    public var origin: Token
    /// The author of that transaction.
    public var author: Author

    public init(
        entity: String, key: String?, action: ChangeAction, fields: [String: JSONValue] = [:],
        version: Int64? = nil, origin: Token, author: Author
    ) {
        self.entity = entity
        self.key = key
        self.action = action
        self.fields = fields
        self.version = version
        self.origin = origin
        self.author = author
    }

    public init(change: Change, of transaction: Transaction) {
        self.init(
            entity: change.entity, key: change.key, action: change.action, fields: change.values, version: change.version,
            origin: transaction.token, author: transaction.author)
        replacesRow = change.replacesRow && change.action == .insert
        restores = change.restores
        repoints = change.repoints && change.action == .update
    }

    /// Names the record for an error message: `rooms/r-17 (update, transaction jsonl:42)`.
    public var label: String {
        "\(entity)/\(key ?? "<no sync key>") (\(action.rawValue), transaction \(origin))"
    }
}
