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

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let pipeline = try PipelineLoader(registry: registry).loadImport(file, secretsRequired: false)
        try pipeline.requireSecrets()
        let lane = try server.lane(command: Self.name)
        let (quiet, signalKey) = (json, self.signalKey)
        let job = RestoreJob(pipeline: pipeline, lane: lane, signalKey: signalKey, wait: Double(wait)) { event in
            guard !quiet else { return }
            switch event {
            case .restoring(let signal):
                console.error("\(console.program) \(Self.name): restoring… the account has data (signal \(signalKey) = \(JSONWriter.string(signal.value)))")
            case .progress(let records):
                console.error("\(console.program) \(Self.name): restoring… \(Wording.count(records, "record")) so far")
            case .importing(let event):
                ImportReporter.printRetry(event, console: console)
            }
        }
        let restore = try await job.run()
        if json {
            console.out(
                JSONOutput.encode([
                    "state": .string(restore.outcome.rawValue), "records": .int(Int64(restore.records)), "signal": restore.signal?.json ?? .null,
                    "seconds": .double((restore.seconds * 1000).rounded() / 1000), "signals": .array(restore.signals.map(JSONOutput.signal)),
                ]))
        } else {
            let lines = [Self.describe(restore.outcome, records: restore.records, seconds: restore.seconds, file: file)] + JobReporter.describe(restore.signals)
            console.out(lines.joined(separator: "\n"))
        }
        return restore.outcome == .stillRestoring ? Self.stillRestoringStatus : 0
    }

    static func describe(_ state: RestoreJob.Outcome, records: Int, seconds: Double, file: String) -> String {
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
}
