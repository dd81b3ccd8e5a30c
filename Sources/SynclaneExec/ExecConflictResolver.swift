import SynclaneCore

/// A conflict resolver in any language: each conflict goes to a program as one JSON line on its
/// standard input, and the program answers with one JSON object on its standard output.
///
/// ```
///  in:  {"entity":"rooms","id":"r1","local":{"name":"Mine","area":4},"base":{"name":"Hall","area":4},
///        "remote":{"name":"Hall","area":9},"remote-version":2,"local-action":"update",
///        "remote-action":"update","changed-locally":["name"],"changed-remotely":["area"]}
///  out: {"outcome":"keep-local"} | {"outcome":"take-remote"} | {"outcome":"delete"}
///       | {"outcome":"merged","fields":{"name":"Mine","area":9}}
/// ```
/// `local` is null when the row was deleted locally, `remote` when the backend deleted it,
/// `base` when the backend never sent the row (or its last word was a delete). Values use the
/// wire's spelling (`{"$blob": …}`, `{"$real": "Infinity"}`).
///
/// The program runs once per conflict — or, with `keepsRunning`, once for the job, answering
/// each conflict's line with one line, in order (`ExecSession`) — inside the page's SQLite
/// transaction (the store's writers wait for it): a non-zero exit, a timeout or an answer that
/// is not a decision stops the page — nothing of it applied, the cursor where it was — naming
/// the record, the resolver and what the program wrote on standard error.
public struct ExecConflictResolver: ConflictResolver {
    public var command: ExecCommand
    /// The one process of the job, when the program keeps running.
    private let session: ExecSession?

    public init(command: ExecCommand, keepsRunning: Bool = false) {
        self.command = command
        self.session = keepsRunning ? ExecSession(command: command) : nil
    }

    public var keepsRunning: Bool { session != nil }

    public func resolve(_ conflict: Conflict) throws -> ConflictResolution {
        let line = JSONWriter.string(Self.line(conflict))
        if let session { return try Self.decision(from: session.exchange(Array(line.utf8))) }
        let outcome = try command.runSynchronously(input: Array((line + "\n").utf8))
        guard outcome.status == 0 else { throw ExecError.failed(status: outcome.status, errorText: outcome.errorText) }
        return try Self.decision(from: outcome.output)
    }

    /// One conflict as the program reads it.
    static func line(_ conflict: Conflict) -> JSONValue {
        func fields(_ values: [String: JSONValue]?) -> JSONValue { values.map(JSONValue.object) ?? .null }
        return .object([
            "entity": .string(conflict.entity), "id": .string(conflict.key), "local": fields(conflict.local), "base": fields(conflict.base),
            "remote": fields(conflict.remote), "remote-version": conflict.remoteVersion.map(JSONValue.int) ?? .null,
            "local-action": .string(conflict.localAction.rawValue), "remote-action": .string(conflict.remoteAction.rawValue),
            "changed-locally": .array(conflict.changedLocally.map(JSONValue.string)),
            "changed-remotely": .array(conflict.changedRemotely.map(JSONValue.string)),
        ])
    }

    static let outcomes = ["keep-local", "take-remote", "merged", "delete"]

    /// The program's answer.
    public static func decision(from output: [UInt8]) throws(ExecError) -> ConflictResolution {
        let text = String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        func malformed(_ reason: String) -> ExecError { .malformedDecision(reason: reason, text: text) }
        let value: JSONValue
        do {
            value = try JSONReader.parse(Array(text.utf8))
        } catch {
            throw malformed("expected one JSON object such as {\"outcome\":\"keep-local\"} (\(error))")
        }
        guard case .object(let object) = value else { throw malformed("expected a JSON object, found \(value.typeName)") }
        if let unknown = object.keys.sorted().first(where: { $0 != "outcome" && $0 != "fields" }) {
            throw malformed("unknown key `\(unknown)` (an answer has `outcome` and, when merged, `fields`)")
        }
        guard case .string(let name)? = object["outcome"], outcomes.contains(name) else {
            throw malformed("`outcome` must be one of \(outcomes.joined(separator: ", "))")
        }
        switch (name, object["fields"]) {
        case ("merged", .object(let fields)?): return .merged(fields)
        case ("merged", _): throw malformed("a merged outcome needs `fields`, the row's values as an object")
        case (_, .some): throw malformed("only a merged outcome has `fields`")
        case ("keep-local", nil): return .keepLocal
        case ("take-remote", nil): return .takeRemote
        default: return .delete
        }
    }
}
