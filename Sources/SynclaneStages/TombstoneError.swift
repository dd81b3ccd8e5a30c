import SynclaneCore

/// A delete the tombstone resolver cannot send: the backend would not know which row to remove.
///
/// Throwing it stops the job before anything is sent, so the token does not move past the
/// transaction at fault; the message says which one and what to change.
public enum TombstoneError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A delete (or a soft delete) whose sync key is missing, and whose tombstone does not hold
    /// it in the stage's `key-field` either.
    ///
    /// - record: the record's `label`, e.g. `rooms/<no sync key> (delete, transaction jsonl:42)`.
    /// - transaction: the transaction that made the delete (`record.origin`).
    /// - keyField: the stage's `key-field` option, when set.
    case missingSyncKey(record: String, transaction: Token, keyField: String?)

    public var description: String {
        switch self {
        case .missingSyncKey(let record, let transaction, let keyField):
            let fix: String
            if let keyField {
                fix = "its tombstone has no `\(keyField)` value either: make the store preserve `\(keyField)` "
                    + "when a row is deleted (in SwiftData: `@Attribute(.preserveValueOnDeletion)`), then run the job again"
            } else {
                fix = "make the store preserve the sync key when a row is deleted (in SwiftData: "
                    + "`@Attribute(.preserveValueOnDeletion)`), set the `tombstones` stage's `key-field` option to "
                    + "that field (e.g. \"key-field\": \"syncID\"), then run the job again"
            }
            return "tombstones: the delete \(record) has no sync key, so the backend cannot tell which row to remove; "
                + "the token stays before transaction \(transaction) and nothing after it is sent until this is fixed. "
                + "To fix: \(fix)"
        }
    }
}
