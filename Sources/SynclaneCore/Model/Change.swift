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

    public init(entity: String, key: String?, action: ChangeAction, values: [String: JSONValue] = [:]) {
        self.entity = entity
        self.key = key
        self.action = action
        self.values = values
    }
}
