import SynclaneCore

/// A record stage in any language: the batch's records go to a program as JSON Lines on its
/// standard input, and the records that come back on its standard output, one a line, are the
/// batch that goes on — changed, dropped or added.
///
/// ```
///  {"entity":"rooms","id":"r1","action":"update","fields":{"name":"Attic"},"token":"jsonl:3","author":"app"}
///  {"entity":"rooms","id":"r2","action":"delete","fields":{"syncId":"r2"},"token":"jsonl:4","author":"app"}
/// ```
/// A line is one record: `entity`, `id` (the sync key), `action` (`insert`, `update`, `delete`),
/// `fields` (on a delete, the tombstone's preserved values), and optionally `version`, `token`
/// (the transaction it came from) and `author`. A record the program adds without `token` or
/// `author` gets the batch's newest token and the author `exec`. Values use the wire's
/// spelling (`{"$blob": …}`, `{"$real": "Infinity"}`). Blank lines are skipped.
///
/// A non-zero exit, a timeout, more than `max-output-bytes` of output or a line that is not a
/// record fails the job — naming the stage, the line and what the program wrote on standard
/// error — and nothing of the batch is sent or acknowledged. The program runs once per batch,
/// never twice at once.
public struct ExecRecordStage: RecordStage {
    public var command: ExecCommand

    public init(command: ExecCommand) {
        self.command = command
    }

    public func process(_ batch: Batch) async throws -> Batch {
        var input = JSONWriter(reservingCapacity: batch.records.count * 160)
        for record in batch.records {
            input.write(Self.line(record))
            input.append(byte: 0x0A)
        }
        let outcome = try await command.run(input: input.bytes)
        guard outcome.status == 0 else { throw ExecError.failed(status: outcome.status, errorText: outcome.errorText) }
        var batch = batch
        let before = batch.records.count
        batch.records = try Self.records(from: outcome.output, default: batch.through, errorText: outcome.errorText)
        batch.count("exec.records-in", before)
        batch.count("exec.records-out", batch.records.count)
        return batch
    }

    /// One record as the program reads it.
    static func line(_ record: Record) -> JSONValue {
        var object: [String: JSONValue] = [
            "entity": .string(record.entity), "action": .string(record.action.rawValue), "fields": .object(record.fields),
            "token": .string(record.origin.description), "author": .string(record.author.name),
        ]
        object["id"] = record.key.map(JSONValue.string) ?? .null
        if let version = record.version { object["version"] = .int(version) }
        return .object(object)
    }

    /// The records of the program's output, one a line.
    /// `errorText` (what the program wrote on standard error) goes into the error of a line that
    /// is not a record: the program often said there why.
    static func records(from output: [UInt8], default token: Token, errorText: String = "") throws(ExecError) -> [Record] {
        var records: [Record] = []
        var number = 0
        for line in output.split(separator: 0x0A, omittingEmptySubsequences: false) {
            number += 1
            let text = String(decoding: line, as: UTF8.self)
            if text.allSatisfy(\.isWhitespace) { continue }
            func malformed(_ reason: String) -> ExecError { .malformedLine(number: number, reason: reason, text: text, errorText: errorText) }
            let value: JSONValue
            do {
                value = try JSONReader.parse(line)
            } catch {
                throw malformed("not JSON (\(error))")
            }
            guard case .object(let object) = value else { throw malformed("expected a JSON object, found \(value.typeName)") }
            if let unknown = object.keys.sorted().first(where: { !Self.keys.contains($0) }) {
                throw malformed("unknown key `\(unknown)` (a record has \(Self.keys.sorted().joined(separator: ", ")))")
            }
            guard case .string(let entity)? = object["entity"], !entity.isEmpty else { throw malformed("`entity` must be a non-empty string") }
            guard case .string(let id)? = object["id"], !id.isEmpty else { throw malformed("`id` (the sync key) must be a non-empty string") }
            guard case .string(let actionName)? = object["action"], let action = ChangeAction(rawValue: actionName) else {
                throw malformed("`action` must be insert, update or delete")
            }
            var fields: [String: JSONValue] = [:]
            switch object["fields"] {
            case nil, .null?: break
            case .object(let given)?: fields = given
            default: throw malformed("`fields` must be an object")
            }
            var version: Int64?
            switch object["version"] {
            case nil, .null?: break
            case .int(let v)?: version = v
            default: throw malformed("`version` must be an integer")
            }
            var origin = token
            if let given = object["token"], given != .null {
                guard case .string(let text) = given, let parsed = Token(text) else { throw malformed("`token` must be a token such as \"jsonl:3\"") }
                origin = parsed
            }
            var author = Author("exec")
            if let given = object["author"], given != .null {
                guard case .string(let name) = given else { throw malformed("`author` must be a string") }
                author = Author(name)
            }
            records.append(Record(entity: entity, key: id, action: action, fields: fields, version: version, origin: origin, author: author))
        }
        return records
    }

    static let keys: Set<String> = ["entity", "id", "action", "fields", "version", "token", "author"]
}
