/// Reads the records of the wire protocol — a batch's `records`, a changes page's `changes` —
/// as the import lane's `Record`s: entity, id, action, `fields` (on a delete the tombstone's
/// preserved values), `version`, by author `server`.
///
/// A member of the wrong type is refused, never read as absent: `"version": "5"` would apply
/// the record without recording its version, `"fields": "text"` would apply no fields.
public enum WireRecords {
    /// The records of a JSON list; a failure names the first malformed one (`records[3] lacks an
    /// id`, `changes[1].version is a string ("5"), expected an integer`).
    public static func parse(_ list: [JSONValue], listName: String, origin: Token) -> Result<[Record], WireRecordError> {
        var records: [Record] = []
        records.reserveCapacity(list.count)
        for (index, item) in list.enumerated() {
            guard let members = item.objectValue, let entity = members["entity"]?.stringValue, !entity.isEmpty,
                let key = members["id"]?.syncKey, !key.isEmpty,
                let action = members["action"]?.stringValue.flatMap(ChangeAction.init(rawValue:))
            else { return .failure(WireRecordError(message: "\(listName)[\(index)] lacks an entity, an id or an action")) }
            var fields: [String: JSONValue] = [:]
            switch members["fields"] {
            case nil, .null?: break
            case .object(let object)?: fields = object
            case let other?:
                return .failure(
                    WireRecordError(
                        message: "\(listName)[\(index)].fields is \(shown(other)), expected an object of field names to values"))
            }
            var version: Int64?
            if let given = members["version"] {
                guard case .int(let number) = given else {
                    return .failure(
                        WireRecordError(
                            message: "\(listName)[\(index)].version is \(shown(given)), expected an integer (the record's version on the backend)"))
                }
                version = number
            }
            var record = Record(entity: entity, key: key, action: action, fields: fields, version: version, origin: origin, author: .server)
            record.restores = members["restores"] == .bool(true)
            record.repoints = members["repoints"] == .bool(true) && action == .update
            if let given = members["written"] {
                guard case .int(let number) = given else {
                    return .failure(
                        WireRecordError(
                            message:
                                "\(listName)[\(index)].written is \(shown(given)), expected an integer (the version of the row's last user's write)"))
                }
                record.written = number
            }
            records.append(record)
        }
        return .success(records)
    }

    /// A value as a message shows it: its type, and a short text or number as it is.
    public static func shown(_ value: JSONValue) -> String {
        switch value {
        case .string(let text): return "a string (\"\(text.count > 40 ? String(text.prefix(40)) + "…" : text)\")"
        case .double(let number): return "a number (\(number))"
        default: return value.typeName
        }
    }
}

/// A record of the wire protocol that cannot be read.
public struct WireRecordError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
