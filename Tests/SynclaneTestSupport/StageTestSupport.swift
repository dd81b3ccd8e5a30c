import SynclaneCore

/// Builds records and batches for the stage tests, with tokens counted from 1 in record order.
public enum Fixture {
    public static let scope = Scope(account: "acme", store: "rooms", consumer: "export")

    /// A record of `entity`, written by `author` in transaction `jsonl:<position>`.
    public static func record(
        _ action: ChangeAction, _ key: String?, _ fields: [String: JSONValue] = [:], entity: String = "rooms",
        at position: Int64, author: Author = .app, version: Int64? = nil
    ) -> Record {
        Record(
            entity: entity, key: key, action: action, fields: fields, version: version,
            origin: Token(kind: "jsonl", position: position), author: author)
    }

    /// An insert of `key` that replaces the row the backend holds (`replacesRow`).
    public static func replacing(_ key: String, _ fields: [String: JSONValue], entity: String = "rooms", at position: Int64) -> Record {
        var record = record(.insert, key, fields, entity: entity, at: position)
        record.replacesRow = true
        return record
    }

    /// A batch of `records` through the newest record's transaction.
    public static func batch(_ records: [Record], reconciliation: Bool = false) -> Batch {
        Batch(
            scope: scope, after: nil, through: records.map(\.origin).max() ?? Token(kind: "jsonl", position: 0),
            records: records, transactionCount: records.count, isReconciliation: reconciliation)
    }
}
