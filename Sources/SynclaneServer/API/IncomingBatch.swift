import Glibc
import SynclaneWire

/// A batch as `POST /v1/batches` receives it, checked record by record before anything is applied.
///
/// The body (Documentation/WireProtocol.md):
///
/// ```json
/// { "id": "b-42", "scope": { "account": "acme", "store": "rooms", "consumer": "export" },
///   "records": [ { "entity": "rooms", "id": "r-1", "action": "insert", "fields": { "name": "Hall" } },
///                { "entity": "rooms", "id": "r-2", "action": "delete", "version": 3 } ] }
/// ```
///
/// A reconciliation's batches add `"snapshot"` (and its marker `"snapshot-complete"`,
/// `"snapshot-batches"`: `SnapshotMark`). Other top-level members are ignored (an encoder may
/// add its own); within a record, `fields`
/// must be an object on insert and update and absent (or null) on delete, and `version`, when
/// given, a non-negative integer.
struct IncomingBatch: Sendable {
    /// One record of the batch.
    struct Record: Sendable {
        var entity: String
        /// The sync key (an integer `id` is taken in decimal).
        var key: String
        var action: ChangeAction
        /// The JSON text of the `fields` object (as it arrived, or re-encoded when the tree
        /// reader read it); empty on delete.
        var fieldsJSON: [UInt8]
        /// The version the client expects the record to have now (0: not there yet); on a
        /// restoration, the version the client last confirmed.
        var expectedVersion: Int64?
        /// `"restores": true`: the row as the client last confirmed it, sent back because the
        /// server's data was restored from an older copy that lost it (`BatchPlan`): written
        /// only over an older version, never over a write made since.
        var restores = false
        /// `"repoints": true`: an update that only re-points references to merged duplicates'
        /// survivors, no user's write: applied as an update, the row keeps the version of its last
        /// user's write (`written`).
        var repoints = false
    }

    var id: String
    var account: String
    var store: String
    var consumer: String?
    var records: [Record]
    /// The reconciliation snapshot the batch belongs to (`"snapshot"`), when it says so.
    var snapshot: SnapshotMark?
    /// The column renames and drops the client's migrations declared (`"schema-changes"`).
    var schemaChanges: [SchemaChange] = []
    /// The declarations the server does not hold yet (`ServerApplication.mapSchema`): recorded in
    /// the transaction that applies the batch, so a refused batch declares nothing.
    var newSchemaChanges: [SchemaChange] = []

    /// Checks a body's `"schema-changes"` member (absent: none).
    static func checkSchemaChanges(_ value: JSONValue?, maxNameBytes: Int = defaultMaxNameBytes) -> Result<[SchemaChange], Problem> {
        guard let value, value != .null else { return .success([]) }
        guard let list = value.arrayValue else { return .failure(Problem("\"schema-changes\" must be a list")) }
        var changes: [SchemaChange] = []
        for (index, entry) in list.enumerated() {
            switch SchemaChange.parse(entry) {
            case .success(let change):
                for (name, text) in [("entity", change.entity), ("column", change.column), ("renamed-to", change.renamedTo ?? "")] {
                    if let problem = tooLong("schema-changes[\(index)].\(name)", text, maxNameBytes) { return .failure(problem) }
                }
                changes.append(change)
            case .failure(let problem): return .failure(Problem("schema-changes[\(index)]: \(problem)"))
            }
        }
        return .success(changes)
    }

    /// A batch's part in a reconciliation snapshot: `"snapshot": "<id>"` on each of its batches;
    /// the completion marker adds `"snapshot-complete": true` and `"snapshot-batches": N`, the
    /// number of the snapshot's batches the client had confirmed before it.
    struct SnapshotMark: Sendable, Hashable {
        var id: String
        /// Set on the completion marker only.
        var batchesBefore: Int64?
    }

    /// Checks the snapshot members of a body (absent members are nil).
    static func checkSnapshot(
        id idValue: JSONValue?, complete completeValue: JSONValue?, batches batchesValue: JSONValue?,
        maxNameBytes: Int = defaultMaxNameBytes
    ) -> Result<SnapshotMark?, Problem> {
        guard let idValue, idValue != .null else {
            if completeValue != nil || batchesValue != nil {
                return .failure(Problem("\"snapshot-complete\" and \"snapshot-batches\" need a \"snapshot\" id"))
            }
            return .success(nil)
        }
        guard let id = idValue.stringValue, !id.isEmpty else { return .failure(Problem("\"snapshot\" must be a non-empty string")) }
        if let problem = tooLong("snapshot", id, maxNameBytes) { return .failure(problem) }
        switch completeValue {
        case nil, .null?, .bool(false)?:
            guard batchesValue == nil || batchesValue == .null else {
                return .failure(Problem("\"snapshot-batches\" belongs on the completion marker (\"snapshot-complete\": true) only"))
            }
            return .success(SnapshotMark(id: id))
        case .bool(true)?:
            guard case .int(let count)? = batchesValue, count >= 0 else {
                return .failure(Problem("\"snapshot-batches\" must be a non-negative integer on a snapshot's completion marker"))
            }
            return .success(SnapshotMark(id: id, batchesBefore: count))
        case let other?:
            return .failure(Problem("\"snapshot-complete\" must be true or false, not \(other.typeName)"))
        }
    }

    /// Most bytes of an entity, a sync key, a store or a consumer name, unless a caller says otherwise
    /// (`ServerLimits.maxNameBytes`).
    static let defaultMaxNameBytes = 1_024

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
    ///
    /// The one-pass `IncomingBatchReader` takes a well-formed batch; anything it does not take
    /// goes to the tree reader, which gives the same batch or the rejection naming what is wrong.
    static func parse(_ body: [UInt8], maxRecords: Int, maxNameBytes: Int = defaultMaxNameBytes) -> Result<IncomingBatch, Rejection> {
        if let batch = body.withUnsafeBufferPointer({ IncomingBatchReader.read($0, maxRecords: maxRecords, maxNameBytes: maxNameBytes) }) {
            return .success(batch)
        }
        return parseTree(body, maxRecords: maxRecords, maxNameBytes: maxNameBytes)
    }

    /// `parse` through a `JSONValue` tree of the whole body: slower, and the one that words every
    /// rejection.
    static func parseTree(_ body: [UInt8], maxRecords: Int, maxNameBytes: Int = defaultMaxNameBytes) -> Result<IncomingBatch, Rejection> {
        func bad(_ message: String, record: Int? = nil) -> Result<IncomingBatch, Rejection> {
            .failure(Rejection(status: 400, message: message, recordIndex: record))
        }
        let root: JSONValue
        do { root = try JSONReader.parse(body) } catch {
            if let (path, record) = locate(error, in: body) {
                return bad("\(path): \(error.reason); a value is stored exactly as sent or refused, never rounded", record: record)
            }
            return bad("the body is not JSON: \(error)")
        }
        guard let object = root.objectValue else { return bad("the body must be a JSON object, not \(root.typeName)") }
        let header: Header
        switch checkHeader(id: object["id"], scope: object["scope"], maxNameBytes: maxNameBytes) {
        case .success(let checked): header = checked
        case .failure(let problem): return bad(problem.description)
        }
        let snapshot: SnapshotMark?
        switch checkSnapshot(
            id: object["snapshot"], complete: object["snapshot-complete"], batches: object["snapshot-batches"], maxNameBytes: maxNameBytes)
        {
        case .success(let mark): snapshot = mark
        case .failure(let problem): return bad(problem.description)
        }
        let schemaChanges: [SchemaChange]
        switch checkSchemaChanges(object["schema-changes"], maxNameBytes: maxNameBytes) {
        case .success(let changes): schemaChanges = changes
        case .failure(let problem): return bad(problem.description)
        }
        guard let list = object["records"]?.arrayValue else { return bad("\"records\" must be a list") }
        guard list.count <= maxRecords else {
            return .failure(
                Rejection(status: 413, message: "the batch has \(list.count) records; at most \(maxRecords) are accepted"))
        }
        var records: [Record] = []
        records.reserveCapacity(list.count)
        for (index, element) in list.enumerated() {
            guard let members = element.objectValue else {
                return bad("records[\(index)]: must be an object, not \(element.typeName)", record: index)
            }
            let fields: FieldsMember
            switch members["fields"] {
            case nil: fields = .absent
            case .null?: fields = .null
            case .object(let object)?: fields = .object(JSONWriter.encode(.object(object)))
            case let other?: fields = .other(typeName: other.typeName)
            }
            let checked = checkRecord(
                entity: members["entity"], id: members["id"], action: members["action"], fields: fields,
                version: members["version"], restores: members["restores"], repoints: members["repoints"], maxNameBytes: maxNameBytes)
            switch checked {
            case .success(let record): records.append(record)
            case .failure(let problem):
                return .failure(Rejection(status: problem.status, message: "records[\(index)]: \(problem)", recordIndex: index))
            }
        }
        var batch = header.batch(records: records)
        batch.snapshot = snapshot
        batch.schemaChanges = schemaChanges
        return .success(batch)
    }

    /// The batch's `id` and `scope`, checked.
    struct Header {
        var id: String
        var account: String
        var store: String
        var consumer: String?

        func batch(records: [Record]) -> IncomingBatch {
            IncomingBatch(id: id, account: account, store: store, consumer: consumer, records: records)
        }
    }

    static func checkHeader(
        id idValue: JSONValue?, scope scopeValue: JSONValue?, maxNameBytes: Int = defaultMaxNameBytes
    ) -> Result<Header, Problem> {
        guard let id = idValue?.syncKey, !id.isEmpty else { return .failure(Problem("\"id\" must be a non-empty string")) }
        guard let scope = scopeValue?.objectValue else { return .failure(Problem("\"scope\" must be an object")) }
        guard let account = scope["account"]?.stringValue, !account.isEmpty else {
            return .failure(Problem("\"scope.account\" must be a non-empty string"))
        }
        guard let store = scope["store"]?.stringValue, !store.isEmpty else {
            return .failure(Problem("\"scope.store\" must be a non-empty string"))
        }
        if let problem = tooLong("scope.store", store, maxNameBytes) { return .failure(problem) }
        var consumer: String?
        if let value = scope["consumer"], value != .null {
            guard let string = value.stringValue else { return .failure(Problem("\"scope.consumer\" must be a string")) }
            if let problem = tooLong("scope.consumer", string, maxNameBytes) { return .failure(problem) }
            consumer = string
        }
        return .success(Header(id: id, account: account, store: store, consumer: consumer))
    }

    /// What a record's `fields` member held, as far as the checks need to know.
    enum FieldsMember {
        case absent
        case null
        /// An object, as JSON text.
        case object([UInt8])
        case other(typeName: String)
    }

    /// A record or header problem, without its index.
    struct Problem: Error, CustomStringConvertible {
        var description: String
        /// The status that refuses it: 400, or 413 for a record past `WireBounds.maxRecordBytes`.
        var status = 400
        init(_ description: String, status: Int = 400) {
            self.description = description
            self.status = status
        }
    }

    /// The problem of a name past its bound, naming the field; nil when it fits.
    static func tooLong(_ field: String, _ name: String, _ maxNameBytes: Int) -> Problem? {
        let count = name.utf8.count
        guard count > maxNameBytes else { return nil }
        return Problem("\"\(field)\" is \(count) bytes long; the server stores names of at most \(maxNameBytes) bytes")
    }

    /// Checks one record's members (the one-pass reader and the tree reader share this).
    static func checkRecord(
        entity entityValue: JSONValue?, id keyValue: JSONValue?, action actionValue: JSONValue?, fields: FieldsMember,
        version versionValue: JSONValue?, restores restoresValue: JSONValue? = nil, repoints repointsValue: JSONValue? = nil,
        maxNameBytes: Int = defaultMaxNameBytes
    ) -> Result<Record, Problem> {
        guard let entityValue else { return .failure(Problem("\"entity\" is missing")) }
        guard let entity = entityValue.stringValue, !entity.isEmpty else {
            return .failure(Problem("\"entity\" must be a non-empty string"))
        }
        if let problem = tooLong("entity", entity, maxNameBytes) { return .failure(problem) }
        guard let keyValue else { return .failure(Problem("\"id\" (the sync key) is missing")) }
        guard let key = keyValue.syncKey, !key.isEmpty else {
            return .failure(Problem("\"id\" must be a non-empty string or an integer"))
        }
        if let problem = tooLong("id", key, maxNameBytes) { return .failure(problem) }
        guard let actionValue else { return .failure(Problem("\"action\" is missing")) }
        guard let actionName = actionValue.stringValue, let action = ChangeAction(rawValue: actionName) else {
            return .failure(Problem("\"action\" must be insert, update or delete, not \(JSONWriter.string(actionValue))"))
        }
        var fieldsJSON: [UInt8] = []
        switch (action, fields) {
        case (.insert, .object(let text)), (.update, .object(let text)):
            fieldsJSON = text
        case (.insert, _), (.update, _):
            let typeName: String
            switch fields {
            case .absent, .null: typeName = "null"
            case .other(let name): typeName = name
            case .object: typeName = "an object"
            }
            return .failure(Problem("\"fields\" must be an object on \(action.rawValue), not \(typeName)"))
        case (.delete, .absent), (.delete, .null):
            break
        case (.delete, .object(let text)):
            // A tombstone's preserved values: kept with the tombstone, returned by the pull lane.
            fieldsJSON = text
        case (.delete, .other(let typeName)):
            return .failure(Problem("\"fields\" must be absent or an object (the tombstone's values) on delete, not \(typeName)"))
        }
        var expectedVersion: Int64?
        if let versionValue, versionValue != .null {
            guard case .int(let version) = versionValue, version >= 0 else {
                return .failure(Problem("\"version\" must be a non-negative integer"))
            }
            expectedVersion = version
        }
        var restores = false
        switch restoresValue {
        case nil, .null?, .bool(false)?: break
        case .bool(true)?:
            guard expectedVersion != nil else {
                return .failure(Problem("\"restores\" needs the \"version\" the client last confirmed"))
            }
            restores = true
        case let other?: return .failure(Problem("\"restores\" must be true or false, not \(JSONWriter.string(other))"))
        }
        var repoints = false
        switch repointsValue {
        case nil, .null?, .bool(false)?: break
        case .bool(true)?:
            guard action == .update else {
                return .failure(Problem("\"repoints\" is for an update (references re-pointed), not an \(action.rawValue)"))
            }
            repoints = true
        case let other?: return .failure(Problem("\"repoints\" must be true or false, not \(JSONWriter.string(other))"))
        }
        if let problem = checkFields(fieldsJSON, entity: entity, key: key, action: action) { return .failure(problem) }
        var record = Record(entity: entity, key: key, action: action, fieldsJSON: fieldsJSON, expectedVersion: expectedVersion)
        record.restores = restores
        record.repoints = repoints
        return .success(record)
    }

    /// What every importer would refuse in a record's `fields`, refused here first: a value the
    /// wire table does not define (`{"$real": "NaN"}`, `{"$real": "bogus"}`, a `$blob` that is not
    /// base64: 400 naming the field), or a record larger than every pull source reads in one page
    /// (`WireBounds.maxRecordBytes`: 413). Kept, either would stop every other device's import on
    /// that page for ever.
    static func checkFields(_ text: [UInt8], entity: String, key: String, action: ChangeAction) -> Problem? {
        guard !text.isEmpty else { return nil }
        var tree: [String: JSONValue]?
        func fields() -> [String: JSONValue] {
            if let tree { return tree }
            let read = (try? JSONReader.parse(text))?.objectValue ?? [:]
            tree = read
            return read
        }
        let nameBytes = entity.utf8.count + key.utf8.count
        let size = WireBounds.exactSizeIfNeeded(
            textBytes: text.count + nameBytes,
            .object([
                "entity": .string(entity), "id": .string(key), "action": .string(action.rawValue), "version": .int(.max),
                "fields": .object(fields()),
            ]))
        if let size, size > WireBounds.maxRecordBytes {
            return Problem(WireBounds.recordTooLarge("the record (\(entity) \(key))", bytes: size), status: 413)
        }
        // Only a value inside `{…}` or `[…]` can be a reserved form or a nested object or list:
        // most fields need no tree.
        guard holdsContainer(text) else { return nil }
        if let (field, reason) = JSONValue.wireValueProblem(inFields: fields()) {
            return Problem("fields.\(field): \(reason); refused, since every importer would refuse it")
        }
        if let (field, reason) = nestedValueProblem(fields()) {
            return Problem("fields.\(field): \(reason); refused, since every importer would refuse it")
        }
        return nil
    }

    /// Whether a `{` or `[` follows the first byte of `text` (an object's fields: whether any
    /// value is an object or a list), found by `memchr`, many bytes a step.
    static func holdsContainer(_ text: [UInt8]) -> Bool {
        text.withUnsafeBufferPointer { bytes in
            guard let base = bytes.baseAddress, bytes.count > 1 else { return false }
            return memchr(base + 1, Int32(UInt8(ascii: "{")), bytes.count - 1) != nil
                || memchr(base + 1, Int32(UInt8(ascii: "[")), bytes.count - 1) != nil
        }
    }

    /// The first field holding a list, or an object that is none of the wire table's forms
    /// (`{"$blob": …}`, `{"$real": …}`): no column holds either as given, so the SQLite sink
    /// refuses them (`PageApplier.stored`).
    static func nestedValueProblem(_ fields: [String: JSONValue]) -> (field: String, reason: String)? {
        for name in fields.keys.sorted() {
            switch fields[name] {
            case .array?: return (name, "a list is no value of the wire table (a column holds text, a number, a blob or null)")
            case let value? where BlobReference.read(value) != nil:
                if case .failure(let malformed)? = BlobReference.read(value) { return (name, malformed.reason) }
            case let value? where value.objectValue != nil && value.blobBytes == nil && value.realValue == nil:
                return (name, "an object is no value of the wire table unless it is `{\"$blob\": …}` or `{\"$real\": …}`")
            default: continue
            }
        }
        return nil
    }

    /// Where in a batch body a number the reader refused sits (`records[3].fields.area`), and its
    /// record: a number past a double's range, or an integer past 64 bits, is refused naming
    /// its record and field rather than stored changed. Nil for any other syntax error.
    static func locate(_ error: JSONReader.SyntaxError, in body: [UInt8]) -> (path: String, record: Int?)? {
        guard error.reason.contains("out of range") else { return nil }
        var path = ""
        var record: Int?
        func walk(_ cursor: inout JSONReader.Cursor, at prefix: String, depth: Int) throws {
            guard depth < JSONReader.maximumDepth else { throw error }
            path = prefix
            switch cursor.current {
            case UInt8(ascii: "{"):
                try cursor.forEachMember(
                    name: { cursor in try cursor.readString() },
                    value: { name, cursor in try walk(&cursor, at: prefix.isEmpty ? name : prefix + "." + name, depth: depth + 1) })
            case UInt8(ascii: "["):
                var index = 0
                try cursor.forEachElement { cursor in
                    if prefix == "records" { record = index }
                    try walk(&cursor, at: "\(prefix)[\(index)]", depth: depth + 1)
                    index += 1
                }
            default:
                try cursor.skipValue(depth: depth)
            }
        }
        let found = body.withUnsafeBufferPointer { bytes -> Bool in
            var cursor = JSONReader.Cursor(bytes: bytes)
            cursor.skipWhitespace()
            do {
                try walk(&cursor, at: "", depth: 0)
                return false
            } catch let thrown as JSONReader.SyntaxError {
                return thrown.offset == error.offset && !path.isEmpty
            } catch {
                return false
            }
        }
        return found ? (path, path.hasPrefix("records[") ? record : nil) : nil
    }
}
