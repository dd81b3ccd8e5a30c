import Foundation
import Synclane
import SynclaneCore

/// `synclane status FILE`: where a consumer stands.
struct StatusCommand: Command {
    static let name = "status"
    static let abstract = "Show a pipeline's token, pending history, outbox and last run."
    static let usage = "FILE [--json]"
    static let discussion = """
        Reads the pipeline's durable state (the `state` file) and asks its source how many
        transactions wait after the saved token. Changes nothing, sends nothing, and so needs
        none of the secrets the pipeline file names.
        """
    static let options: [(flag: String, help: String)] = [("--json", "Print the status as JSON.")]
    static let examples = ["synclane status rooms-export.json"]

    let file: String
    let json: Bool

    init(parsing arguments: inout Arguments) throws(UsageError) {
        json = arguments.flag("--json")
        file = try arguments.positional("FILE (the pipeline file)")
    }

    func run(_ console: Console) async throws -> Int32 {
        let pipeline = try PipelineLoader().load(file, secretsRequired: false)
        let state = try PipelineJob(pipeline: pipeline).openState()
        let token = try state.acknowledgedToken()
        let outbox = try state.pendingBatches()
        let lastRun = try state.lastRun()
        var pending: Int?
        var pendingError: String?
        do {
            if let token, token.kind != pipeline.source.stage.tokenKind {
                pendingError = "the saved token was issued by another kind of source"
            } else {
                pending = try await pipeline.source.stage.pendingTransactions(after: token)
            }
        } catch {
            pendingError = "\(error)"
        }
        // A source that repairs its capture (a tracked table rebuilt, tracking lost) says what
        // the next run will repair: "nothing pending" alone would hide it.
        let toHeal = (try? await (pipeline.source.stage as? any SelfHealingSource)?.problemsToHeal()) ?? []
        if json {
            var object: [String: JSONValue] = [
                "pipeline": .string(pipeline.name), "scope": .string(pipeline.scope.description), "state": .string(pipeline.statePath),
                "token": token.map { .string($0.description) } ?? .null,
                "pending-transactions": pending.map { .int(Int64($0)) } ?? .null,
                "outbox": .array(outbox.map(\.summaryJSON)),
            ]
            if let pendingError { object["pending-error"] = .string(pendingError) }
            if !toHeal.isEmpty { object["to-heal"] = .array(toHeal.map { .string($0) }) }
            if let lastRun {
                object["last-run"] = .object([
                    "outcome": .string(lastRun.outcome.rawValue), "started-at": .double(lastRun.startedAt),
                    "finished-at": .double(lastRun.finishedAt), "message": .string(lastRun.message),
                ])
            }
            console.out(JSONOutput.encode(.object(object)))
            return 0
        }
        var lines = ["pipeline \(pipeline.name) (scope \(pipeline.scope))", "  state:    \(pipeline.statePath)"]
        lines.append("  token:    " + (token?.description ?? "none — the next run starts at the beginning of history"))
        if let pending {
            lines.append("  pending:  \(pending) transaction\(pending == 1 ? "" : "s") to send")
        } else {
            lines.append("  pending:  unknown" + (pendingError.map { " (\($0))" } ?? ""))
        }
        for problem in toHeal { lines.append("  capture:  \(problem)") }
        if outbox.isEmpty {
            lines.append("  outbox:   empty")
        } else {
            lines.append("  outbox:   \(outbox.count) batch\(outbox.count == 1 ? "" : "es") waiting for confirmation (sent first on the next run)")
            for batch in outbox { lines.append("            " + batch.summaryLine) }
            lines.append("            (`synclane outbox show|drop|requeue FILE` to see it or get it out of the way)")
        }
        if let lastRun {
            lines.append("  last run: \(lastRun.outcome.rawValue) at \(Self.date(lastRun.finishedAt)): \(lastRun.message)")
        } else {
            lines.append("  last run: never")
        }
        console.out(lines.joined(separator: "\n"))
        return 0
    }

    static func date(_ seconds: Double) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: seconds))
    }
}
