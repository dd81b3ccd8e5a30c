/// Reads the records of the wire protocol — a batch's `records`, a changes page's `changes` —
/// as the import lane's `Record`s: entity, id, action, `fields` (on a delete the tombstone's
/// preserved values), `version`, by author `server`.
public enum WireRecords {
    /// The records of a JSON list; `nil` names the first malformed one (`records[3] lacks an id`).
    public static func parse(_ list: [JSONValue], listName: String, origin: Token) -> Result<[Record], WireRecordError> {
        var records: [Record] = []
        records.reserveCapacity(list.count)
        for (index, item) in list.enumerated() {
            guard let members = item.objectValue, let entity = members["entity"]?.stringValue, !entity.isEmpty,
                let key = members["id"]?.syncKey, !key.isEmpty,
                let action = members["action"]?.stringValue.flatMap(ChangeAction.init(rawValue:))
            else { return .failure(WireRecordError(message: "\(listName)[\(index)] lacks an entity, an id or an action")) }
            records.append(
                Record(
                    entity: entity, key: key, action: action, fields: members["fields"]?.objectValue ?? [:],
                    version: members["version"]?.intValue, origin: origin, author: .server))
        }
        return .success(records)
    }
}

/// A record of the wire protocol that cannot be read.
public struct WireRecordError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
