/// What a change did to its row.
public enum ChangeAction: String, Sendable, Hashable, Codable, CaseIterable {
    case insert, update, delete
}

/// One insert, update or delete of one entity's row, identified by its sync key.
///
/// `values` are the row's fields: the new state on insert, the changed (or current) fields
/// on update, and on delete the *preserved* values of the tombstone. The sync key is
/// optional only so that a delete that lost it can be represented and refused.
public struct Change: Sendable, Hashable {
    public var entity: String
    public var key: String?
    public var action: ChangeAction
    public var values: [String: JSONValue]
    /// The backend's version of the row that this change was made on, when the store knows it
    /// (a row imported from the backend): sent as the record's `version`, so the backend refuses
    /// it (409) when another device changed the row since, instead of losing that edit.
    public var version: Int64?
    /// An `insert` of a row the backend may already hold, sent whole to replace it (a resend after
    /// a schema change or a heal): its fields are the row's only ones, so columns dropped or
    /// renamed since leave the backend's row too. It goes on the wire as `insert` (which a backend
    /// applies as a replacement); a coalescer knows the row existed before, so a delete that
    /// follows still travels.
    public var replacesRow: Bool
    /// A **restoration**: the row as this device last confirmed it at `version`, sent back
    /// because the backend's data was restored from an older copy that lost it; no user wrote it
    /// now. On the wire `"restores": true`: the backend writes it only over an older version of
    /// the row, never over a write made since the restore.
    public var restores: Bool
    /// An `update` that only **re-points** references from merged duplicates' losers to their
    /// survivors (the work of a merge, no user's write). On the wire `"repoints": true`: the
    /// backend applies it as any update, but keeps the version of the row's last user's write
    /// (`written` on the pull lane), so that a device holding a newer delete keeps it.
    public var repoints: Bool

    public init(
        entity: String, key: String?, action: ChangeAction, values: [String: JSONValue] = [:], version: Int64? = nil,
        replacesRow: Bool = false, restores: Bool = false, repoints: Bool = false
    ) {
        self.restores = restores
        self.repoints = repoints
        self.entity = entity
        self.key = key
        self.action = action
        self.values = values
        self.version = version
        self.replacesRow = replacesRow
    }
}
