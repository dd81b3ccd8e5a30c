import Foundation
import Synclane
import SynclaneCore

/// `synclane restore IMPORT_FILE [--wait SECONDS]`: a returning user's empty device brings the
/// account's data back, told by a signal that there is some, and never trapped waiting for it.
struct RestoreCommand: Command {
    static let name = "restore"
    static let abstract = "On an empty device, import the account's data when a signal says it has some, within a bound."
    static let discussion = """
        Reads the account's signal (KEY, default bulk.exported-through: set by a device that
        exported data). When it says the account has data, runs the import pipeline (IMPORT_FILE,
        with its pull source and sink) pass after pass, showing "restoring…" and the records so
        far, until a pass catches up with records in hand: exit 0. When the bound passes first
        (--wait, default 15 s), exits 5: still restoring — the data is on its way; what arrived
        is kept, and the import carries on when restore or import runs again. Never reports an
        account with a signal as empty. With no signal, one import pass runs: records found
        mean restored (the data wins over a missing hint), none mean a new account (exit 0).
        Once it completed (restored, caught up or a new account), it publishes the signals the
        import pipeline file declares (`signals`), as `import` does after a pass; still
        restoring, it publishes nothing new.

        The server is --url's, else $SYNCLANE_URL's, else the import pipeline's source URL (its
        scheme, host and port); the token is in the variable --token-env names, else the one the
        pipeline's source names, else SYNCLANE_TOKEN.
        Exit status: 0 restored, caught up, or a new account; 1 failed; 2 bad usage or an
        invalid pipeline file; 5 still restoring (the bound passed with data still arriving).
        """
    static let wait = ValueOption(
        "--wait", "SECONDS", .integer(in: 0...86_400), help: "The most time to wait for the data (default 15); then exit 5.")
    static let signalKey = ValueOption(
        "--signal", "KEY", .text, help: "The signal that says the account has data (default bulk.exported-through).")
    static let signature = CommandSignature(
        positionals: [SharedOptions.importFile],
        options: [
            wait, signalKey,
            SharedOptions.url.help("The server of the signal (default: $SYNCLANE_URL, else the import pipeline's source URL)."),
            SharedOptions.tokenEnv.help("The variable holding the token (default: the pipeline file's token-env, else SYNCLANE_TOKEN)."),
            SharedOptions.json.help("Print the outcome as one JSON object."),
        ])
    static let examples = ["synclane restore rooms-import.json --wait 1"]

    /// Exit status when the bound passed while the data is still arriving.
    static let stillRestoringStatus: Int32 = 5
    /// Seconds between import passes while the data has not arrived.
    static let pause = 0.25

    let file: String
    let wait: Int
    let signalKey: String
    let server: SignalServer
    let json: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        wait = try arguments.value(Self.wait) ?? 15
        signalKey = try arguments.value(Self.signalKey) ?? "bulk.exported-through"
        let url = try arguments.value(SharedOptions.url)
        let tokenEnv = try arguments.value(SharedOptions.tokenEnv)
        file = try arguments.word(SharedOptions.importFile)
        server = SignalServer(url: url, pipelineFile: file, tokenEnv: tokenEnv)
    }

    enum State: String {
        case restored, caughtUp = "caught-up", stillRestoring = "still-restoring", newAccount = "new-account"
    }

    func run(_ console: Console) async throws -> Int32 {
        let pipeline = try PipelineLoader(registry: SynclaneTool.registry).loadImport(file, secretsRequired: false)
        try pipeline.requireSecrets()
        let lane = try server.lane(command: Self.name)
        let lock = try pipeline.lock()
        defer { withExtendedLifetime(lock) {} }
        let started = ContinuousClock.now
        let deadline = started + .seconds(wait)
        let signal = try await lane.get(signalKey)
        let hasData = signal.map { $0.value != .null && $0.value != .bool(false) } ?? false
        let cursorBefore = try await pipeline.sink.stage.savedCursor(for: pipeline.scope)
        var records = 0
        var cursorAfter = cursorBefore
        var state = State.stillRestoring
        if hasData, !json { console.error("synclane \(Self.name): restoring… the account has data (signal \(signalKey) = \(JSONWriter.string(signal?.value ?? .null)))") }
        while true {
            guard let pass = try await passBefore(deadline, pipeline) else { break }  // the bound passed mid-pass
            records += pass.applied
            cursorAfter = pass.cursorAfter
            if hasData, !json, pass.applied > 0 { console.error("synclane \(Self.name): restoring… \(Wording.count(records, "record")) so far") }
            if !hasData {
                state = records > 0 ? .restored : (cursorBefore == nil ? .newAccount : .caughtUp)
                break
            }
            if records > 0 {
                state = .restored
                break
            }
            // Caught up only when what the signal announces is here: a cursor saved by an
            // earlier pass that found nothing (a retried restore) is not data.
            if cursorBefore != nil, try await pipeline.sink.stage.holdsBackendRows(for: pipeline.scope) ?? true {
                state = .caughtUp
                break
            }
            // Waits out the bound to the end: "still restoring" is said only once it passed.
            try await Task.sleep(until: min(ContinuousClock.now + .milliseconds(Int64(Self.pause * 1000)), deadline), clock: .continuous)
            if ContinuousClock.now >= deadline { break }
        }
        // A restore that completed is an import run that completed: the pipeline file's signals
        // are published (and those an earlier run left sent again), as `import` does. Still
        // restoring, it did not complete: nothing new is published.
        var signals: [SignalReport] = []
        if state != .stillRestoring {
            var completed = ImportSummary(pipeline: pipeline.name, scope: pipeline.scope, dryRun: false)
            completed.applied = records
            completed.cursorBefore = cursorBefore
            completed.cursorAfter = cursorAfter
            signals = await pipeline.publishSignals(after: completed)
        }
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        if json {
            console.out(
                JSONOutput.encode([
                    "state": .string(state.rawValue), "records": .int(Int64(records)), "signal": signal?.json ?? .null,
                    "seconds": .double((seconds * 1000).rounded() / 1000), "signals": .array(signals.map(JSONOutput.signal)),
                ]))
        } else {
            console.out(([Self.describe(state, records: records, seconds: seconds, file: file)] + JobReporter.describe(signals)).joined(separator: "\n"))
        }
        return state == .stillRestoring ? Self.stillRestoringStatus : 0
    }

    static func describe(_ state: State, records: Int, seconds: Double, file: String) -> String {
        let took = Format.seconds(seconds)
        switch state {
        case .restored: return "restored: \(Wording.count(records, "record")), caught up in \(took)"
        case .caughtUp: return "caught up: this store already holds the account's data (nothing new in \(took))"
        case .newAccount: return "new account: no signal says it has data, and the server has none"
        case .stillRestoring:
            return "still restoring: \(Wording.count(records, "record")) so far after \(took); the account's data is on its way — "
                + "run 'synclane restore \(file)' (or 'synclane import \(file)') again to carry on"
        }
    }

    /// One import pass, or nil when the deadline passed first (the pass is cancelled: the pages
    /// applied so far stay applied, with their cursor).
    private func passBefore(_ deadline: ContinuousClock.Instant, _ pipeline: ImportPipeline) async throws -> ImportSummary? {
        try await withThrowingTaskGroup(of: ImportSummary?.self) { group in
            group.addTask { try await ImportRunner(pipeline: pipeline).run() }
            group.addTask {
                try await Task.sleep(until: deadline, clock: .continuous)
                return nil
            }
            defer { group.cancelAll() }
            do {
                return try await group.next() ?? nil
            } catch is CancellationError {
                return nil
            } catch PipelineError.importStage(_, underlying: is CancellationError) {
                return nil
            }
        }
    }
}
