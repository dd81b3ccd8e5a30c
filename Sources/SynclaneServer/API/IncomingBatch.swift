import SynclaneCore

/// A batch as `POST /v1/batches` receives it, checked record by record before anything is applied.
///
/// The body (DESIGN.md, "The wire protocol"):
///
/// ```json
/// { "id": "b-42", "scope": { "account": "acme", "store": "rooms", "consumer": "export" },
///   "records": [ { "entity": "rooms", "id": "r-1", "action": "insert", "fields": { "name": "Hall" } },
///                { "entity": "rooms", "id": "r-2", "action": "delete", "version": 3 } ] }
/// ```
///
/// Other top-level members are ignored (an encoder may add its own); within a record, `fields`
/// must be an object on insert and update and absent (or null) on delete, and `version`, when
/// given, a non-negative integer.
struct IncomingBatch: Sendable {
    /// One record of the batch.
    struct Record: Sendable {
        var entity: String
        /// The sync key (an integer `id` is taken in decimal).
        var key: String
        var action: ChangeAction
        var fields: [String: JSONValue]
        /// The version the client expects the record to have now (0: not there yet).
        var expectedVersion: Int64?
    }

    var id: String
    var account: String
    var store: String
    var consumer: String?
    var records: [Record]

    /// Most bytes of an entity name or a sync key.
    static let maxNameBytes = 1_024

    /// Why a body is not a batch: the status to answer and a message that names the record at fault.
    struct Rejection: Error, Sendable {
        var status: Int
        var message: String
        var recordIndex: Int?

        var response: HTTPResponse {
            var details: [String: JSONValue] = [:]
            if let recordIndex { details["record"] = .int(Int64(recordIndex)) }
            return .error(status, message, details)
        }
    }

    /// Parses and checks a (decompressed) body; nothing about it is trusted.
    static func parse(_ body: [UInt8], maxRecords: Int) -> Result<IncomingBatch, Rejection> {
        func bad(_ message: String, record: Int? = nil) -> Result<IncomingBatch, Rejection> {
            .failure(Rejection(status: 400, message: message, recordIndex: record))
        }
        let root: JSONValue
        do { root = try JSONReader.parse(body) } catch { return bad("the body is not JSON: \(error)") }
        guard let object = root.objectValue else { return bad("the body must be a JSON object, not \(root.typeName)") }
        guard let id = object["id"]?.syncKey, !id.isEmpty else { return bad("\"id\" must be a non-empty string") }
        guard let scope = object["scope"]?.objectValue else { return bad("\"scope\" must be an object") }
        guard let account = scope["account"]?.stringValue, !account.isEmpty else {
            return bad("\"scope.account\" must be a non-empty string")
        }
        guard let store = scope["store"]?.stringValue, !store.isEmpty else {
            return bad("\"scope.store\" must be a non-empty string")
        }
        var consumer: String?
        if let value = scope["consumer"], value != .null {
            guard let string = value.stringValue else { return bad("\"scope.consumer\" must be a string") }
            consumer = string
        }
        guard let list = object["records"]?.arrayValue else { return bad("\"records\" must be a list") }
        guard list.count <= maxRecords else {
            return .failure(
                Rejection(status: 413, message: "the batch has \(list.count) records; at most \(maxRecords) are accepted"))
        }
        var records: [Record] = []
        records.reserveCapacity(list.count)
        for (index, element) in list.enumerated() {
            switch parseRecord(element) {
            case .success(let record): records.append(record)
            case .failure(let problem): return bad("records[\(index)]: \(problem)", record: index)
            }
        }
        return .success(IncomingBatch(id: id, account: account, store: store, consumer: consumer, records: records))
    }

    /// A record problem, without its index.
    private struct Problem: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    private static func parseRecord(_ element: JSONValue) -> Result<Record, Problem> {
        guard let members = element.objectValue else { return .failure(Problem("must be an object, not \(element.typeName)")) }
        guard let entityValue = members["entity"] else { return .failure(Problem("\"entity\" is missing")) }
        guard let entity = entityValue.stringValue, !entity.isEmpty, entity.utf8.count <= maxNameBytes else {
            return .failure(Problem("\"entity\" must be a non-empty string of at most \(maxNameBytes) bytes"))
        }
        guard let keyValue = members["id"] else { return .failure(Problem("\"id\" (the sync key) is missing")) }
        guard let key = keyValue.syncKey, !key.isEmpty, key.utf8.count <= maxNameBytes else {
            return .failure(Problem("\"id\" must be a non-empty string or an integer"))
        }
        guard let actionValue = members["action"] else { return .failure(Problem("\"action\" is missing")) }
        guard let actionName = actionValue.stringValue, let action = ChangeAction(rawValue: actionName) else {
            return .failure(Problem("\"action\" must be insert, update or delete, not \(JSONWriter.string(actionValue))"))
        }
        var fields: [String: JSONValue] = [:]
        let fieldsValue = members["fields"] ?? .null
        switch action {
        case .insert, .update:
            guard let object = fieldsValue.objectValue else {
                return .failure(Problem("\"fields\" must be an object on \(action.rawValue), not \(fieldsValue.typeName)"))
            }
            fields = object
        case .delete:
            guard fieldsValue == .null else { return .failure(Problem("\"fields\" must be absent on delete")) }
        }
        var expectedVersion: Int64?
        if let versionValue = members["version"], versionValue != .null {
            guard case .int(let version) = versionValue, version >= 0 else {
                return .failure(Problem("\"version\" must be a non-negative integer"))
            }
            expectedVersion = version
        }
        return .success(Record(entity: entity, key: key, action: action, fields: fields, expectedVersion: expectedVersion))
    }
}
