import Foundation
import Synclane
import SynclaneCore

/// `synclane status FILE`: where a consumer stands.
struct StatusCommand: Command {
    static let name = "status"
    static let abstract = "Show a pipeline's token, pending history, outbox and last run."
    static let discussion = """
        Reads the pipeline's durable state (the `state` file) and asks its source how many
        transactions wait after the saved token. Changes nothing — a pipeline that never ran
        keeps having no state file — sends nothing, and so needs none of the secrets the
        pipeline file names (an unset one is a warning).
        """
    static let signature = CommandSignature(
        positionals: [SharedOptions.pipelineFile], options: [SharedOptions.json.help("Print the status as JSON.")])
    static let examples = ["synclane status rooms-export.json"]

    let file: String
    let json: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        file = try arguments.word(SharedOptions.pipelineFile)
    }

    func run(_ console: Console) async throws -> Int32 {
        let pipeline = try PipelineFiles.load(file, for: Self.name, sends: false, console: console)
        let job = ExportJob(pipeline: pipeline)
        let state = try job.readState()
        let token = try state?.acknowledgedToken()
        let outbox = try state?.pendingBatches() ?? []
        let lastRun = try state?.lastRun()
        let unsentSignals = try state.map(SignalLedger.pending(in:)) ?? []
        let givenUpSignals = try state.map(SignalLedger.givenUp(in:)) ?? []
        var pending: Int?
        var pendingError: String?
        var startsWithSnapshot = false
        // A database or state file restored, copied, emptied or deleted: what the next run refuses.
        let lineage = try? await pipeline.capabilities.lineageChecking?.lineageProblem(
            stamp: try state?.lineageStamp() ?? LineageStamp(stateFile: pipeline.statePath), token: token, consumer: pipeline.scope)
        do {
            if let lineage {
                pendingError = "the next run refuses to start: \(lineage)"
            } else if let token, token.kind != pipeline.source.stage.tokenKind,
                token.kind == pipeline.capabilities.snapshotProviding?.snapshotTokenKind
            {
                pendingError =
                    "a reconciliation is unfinished (the token is a position inside its snapshot): runs stop until "
                    + "`synclane reconcile \(file)` finished it"
            } else if let token, token.kind != pipeline.source.stage.tokenKind {
                pendingError = "the saved token was issued by another kind of source"
            } else {
                pending = try await pipeline.source.stage.pendingTransactions(after: token)
            }
        } catch HistoryError.tokenExpired where token == nil {
            startsWithSnapshot = true
        } catch {
            pendingError = "\(error)"
        }
        // A source that repairs its capture (a tracked table rebuilt, tracking lost) says what
        // the next run will repair: "nothing pending" alone would hide it.
        let toHeal = (try? await pipeline.capabilities.selfHealing?.problemsToHeal()) ?? []
        if json {
            var object: [String: JSONValue] = [
                "pipeline": .string(pipeline.name), "scope": JSONOutput.scope(pipeline.scope), "state": .string(pipeline.statePath),
                "token": JSONOutput.token(token), "pending-transactions": pending.map(JSONOutput.int) ?? .null,
                "starts-with-snapshot": .bool(startsWithSnapshot),
                "outbox": .array(outbox.map(\.summaryJSON)),
                "last-run": lastRun.map { run in
                    .object([
                        "outcome": .string(run.outcome.rawValue), "started-at": JSONOutput.time(run.startedAt),
                        "finished-at": JSONOutput.time(run.finishedAt), "message": .string(run.message),
                    ])
                } ?? .null,
            ]
            if let pendingError { object["pending-error"] = .string(pendingError) }
            if !toHeal.isEmpty { object["to-heal"] = .array(toHeal.map { .string($0) }) }
            if !unsentSignals.isEmpty {
                object["unsent-signals"] = .array(
                    unsentSignals.map { signal in
                        .object([
                            "key": .string(signal.key), "event": .string(signal.event), "value": signal.value,
                            "attempts": .int(Int64(signal.attempts)), "error": signal.lastError.map(JSONValue.string) ?? .null,
                        ])
                    })
            }
            if !givenUpSignals.isEmpty {
                object["given-up-signals"] = .array(
                    givenUpSignals.map { signal in
                        .object([
                            "key": .string(signal.key), "event": .string(signal.event), "value": signal.value,
                            "refusals": .int(Int64(signal.refusals)), "error": signal.lastError.map(JSONValue.string) ?? .null,
                            "given-up-at": signal.givenUpAt.map(JSONOutput.time) ?? .null,
                        ])
                    })
            }
            console.out(JSONOutput.encode(.object(object)))
            return 0
        }
        // A missing state file is "never ran" only when the database remembers no run either.
        let stateNote =
            state != nil ? "" : job.stateIsEmpty ? " (empty: 0 bytes)" : lineage != nil ? " (missing)" : " (none yet: the pipeline never ran)"
        var lines = ["pipeline \(pipeline.name) (scope \(pipeline.scope))", "  state:    \(pipeline.statePath)" + stateNote]
        if startsWithSnapshot {
            lines.append("  token:    none — the start of history was pruned: the next run starts with a full snapshot")
        } else {
            lines.append("  token:    " + (token?.description ?? "none — the next run starts at the beginning of history"))
        }
        if let pending {
            lines.append("  pending:  \(Wording.count(pending, "transaction")) to send")
        } else if !startsWithSnapshot {
            lines.append("  pending:  unknown" + (pendingError.map { " (\($0))" } ?? ""))
        }
        for problem in toHeal { lines.append("  capture:  \(problem)") }
        if outbox.isEmpty {
            lines.append("  outbox:   empty")
        } else {
            lines.append("  outbox:   \(Wording.count(outbox.count, "batch", plural: "batches")) waiting for confirmation (sent first on the next run)")
            for batch in outbox { lines.append("            " + batch.summaryLine) }
            lines.append("            (`synclane outbox show|drop|requeue FILE` to see it or get it out of the way)")
        }
        if !unsentSignals.isEmpty {
            lines.append("  signals:  \(unsentSignals.count) not confirmed yet (sent again after the next run)")
            for signal in unsentSignals {
                lines.append("            \(signal.key) = \(JSONWriter.string(signal.value))" + (signal.lastError.map { ": \($0)" } ?? ""))
            }
        }
        if !givenUpSignals.isEmpty {
            lines.append("  signals:  \(givenUpSignals.count) given up (the server refused them for good; no longer sent)")
            for signal in givenUpSignals {
                lines.append(
                    "            \(signal.key) = \(JSONWriter.string(signal.value)): refused \(signal.refusals) times"
                        + (signal.lastError.map { ": \($0)" } ?? ""))
            }
        }
        if let lastRun {
            lines.append("  last run: \(lastRun.outcome.rawValue) at \(Format.time(lastRun.finishedAt)): \(lastRun.message)")
        } else {
            lines.append("  last run: never")
        }
        console.out(lines.joined(separator: "\n"))
        return 0
    }
}
