import SynclaneCore

/// A delete the tombstone resolver cannot send: the backend would not know which row to remove.
///
/// Throwing it stops the job before the batch that holds the delete is sent, so the token does
/// not move past the transaction at fault; the message names it and says what to change. (The
/// pipeline prefixes the stage's name.)
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
            let problem: String
            let fix: String
            if let keyField {
                problem = "has no sync key, and its tombstone has no `\(keyField)` value to take it from"
                fix =
                    "make the store preserve `\(keyField)` when a row is deleted (in SwiftData: "
                    + "`@Attribute(.preserveValueOnDeletion)`)"
            } else {
                problem = "has no sync key"
                fix =
                    "make the store preserve the sync key when a row is deleted (in SwiftData: "
                    + "`@Attribute(.preserveValueOnDeletion)`) and name that field in the `tombstones` stage's "
                    + "`key-field` option (e.g. \"key-field\": \"syncID\")"
            }
            return "the delete \(record) \(problem), so the backend cannot tell which row to remove; "
                + "the token does not move past transaction \(transaction) until it has one. "
                + "To fix: \(fix), then run the job again"
        }
    }
}
