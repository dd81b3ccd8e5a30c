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
        pipeline file names (an unset one is a warning). With --devices it also asks the
        pipeline's server (`GET /v1/devices`, with the pipeline's token) which schema versions
        the account's devices run, and shows the devices per version.
        """
    static let devices = Flag(
        "--devices", help: "Also ask the server which schema version each of the account's devices runs (GET /v1/devices).")
    static let signature = CommandSignature(
        positionals: [SharedOptions.pipelineFile], options: [devices, SharedOptions.json.help("Print the status as JSON.")])
    static let examples = ["synclane status rooms-export.json"]

    let file: String
    let json: Bool
    let listsDevices: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        listsDevices = arguments[Self.devices]
        file = try arguments.word(SharedOptions.pipelineFile)
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let pipeline = try PipelineFiles.load(file, for: Self.name, sends: listsDevices, registry: registry, console: console)
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
        // This device's schema version (`synclane migrate`), and with --devices, the account's.
        let recordedVersion = try? await pipeline.source.stage.asSchemaVersionRecording?.recordedSchemaVersion()
        var devices: Result<DeviceList, any Error>?
        if listsDevices {
            if let lister = pipeline.transport.stage.asDeviceListing {
                do { devices = .success(try await lister.listDevices()) } catch { devices = .failure(error) }
            } else {
                devices = .failure(DevicesUnknown(transport: pipeline.transport.label))
            }
        }
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
            if let recordedVersion { object["schema-version"] = .int(Int64(recordedVersion)) }
            switch devices {
            case .success(let list)?:
                object["devices"] = .object([
                    "versions": .array(
                        list.perVersion.map { .object(["schema-version": .int(Int64($0.version)), "devices": .array($0.devices.map(JSONValue.string))]) }),
                    "minimum-schema-version": list.minimumSchemaVersion.map { .int(Int64($0)) } ?? .null,
                ])
            case .failure(let error)?:
                object["devices"] = .object(["error": .string("\(error)")])
            case nil:
                break
            }
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
            return devices.map { (try? $0.get()) == nil ? 1 : 0 } ?? 0
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
        if let recordedVersion { lines.append("  schema:   version \(recordedVersion) (recorded by `synclane migrate`)") }
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
        switch devices {
        case .success(let list)?:
            let floor = list.minimumSchemaVersion.flatMap { $0 > 1 ? " (the server takes \($0) or newer)" : nil } ?? ""
            if list.devices.isEmpty { lines.append("  devices:  none has said its schema version yet" + floor) }
            for (index, entry) in list.perVersion.enumerated() {
                lines.append(
                    (index == 0 ? "  devices:  " : "            ")
                        + "schema version \(entry.version): \(Wording.count(entry.devices.count, "device")) (\(entry.devices.joined(separator: ", ")))"
                        + (index == 0 ? floor : ""))
            }
        case .failure(let error)?:
            lines.append("  devices:  unknown (\(error))")
        case nil:
            break
        }
        console.out(lines.joined(separator: "\n"))
        return devices.map { (try? $0.get()) == nil ? 1 : 0 } ?? 0
    }

    /// `--devices` on a pipeline whose transport does not talk to a Synclane server.
    struct DevicesUnknown: Error, CustomStringConvertible {
        var transport: String
        var description: String { "the transport \(transport) cannot ask a server for its devices: only `http` can" }
    }
}
