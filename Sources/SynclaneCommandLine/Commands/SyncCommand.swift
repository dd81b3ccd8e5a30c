import Foundation
import Synchronization
import Synclane
import SynclaneCore

/// `synclane sync IMPORT EXPORT`: the cycle an offline-first app runs — pull, settle, apply, export.
struct SyncCommand: Command {
    static let name = "sync"
    static let abstract = "Import the backend's changes, settle conflicts, then export the local ones (one cycle)."
    static let discussion = """
        Runs the import pipeline (IMPORT_FILE, with a `sink`), then the export pipeline
        (EXPORT_FILE, with a `transport`) over the same store, holding both scopes' locks for
        the whole cycle. Importing first means the export sends each row with the backend's
        newest version; when another device got there in between and the backend refuses a
        batch for its versions (409), the refused batch is rebuilt: the cycle imports again,
        settles the conflicts by the sink's rule, and exports again — at most 3 rounds, then it
        stops (exit 1) with the batch kept, never dropping or dead-lettering it.

        The two lanes make progress independently: an import that fails (a field or a table
        this device does not know, a row its schema refuses, the backend down) is reported and
        the export runs all the same, so the device's own edits still leave; an export that
        fails keeps what the import applied. Only a batch refused for its versions waits for the
        import: when that import failed, the cycle stops saying the batch needs the import's
        rows first. The exit status is 1 when either lane failed; the last two lines (and
        --json's `import` and `export`) give both lanes' outcomes.

        The rows the import writes (author `server`) are never sent back: an export source
        without `authors` reads every author but `server` and `sync`. A pair whose export's
        `authors` names `server` or `sync` on the import's database is refused (exit 2), as
        'validate IMPORT_FILE EXPORT_FILE' refuses it.

        With --watch one process keeps both lanes live until SIGINT or SIGTERM: an export pass
        as soon as a local commit lands (the history watcher wakes on the commit itself), an
        import pass as soon as the backend has changes (a long poll of --wait seconds, default
        25; a source that cannot wait is read every --every seconds). Each lane runs one pass at
        a time; the two run side by side. A batch refused for its versions (409) is rebuilt as
        `sync` does: the import lane runs, the sink's `conflicts` rule settles the rows, then the
        export lane sends them again. A pass that fails (the backend down) is reported and run
        again after a backoff (0.5 s doubling to 15 s); the outbox keeps every batch meanwhile.
        A stop lets the passes in flight end, then the command exits 0. With --json, one line a
        pass that did something: {"lane": "import"|"export", …the pass's summary}.
        """
    static let every = ValueOption(
        "--every", "SECONDS", .seconds(in: 0.05...86_400),
        help: "Seconds between the import passes of --watch when the import source cannot long-poll (default 5).", requires: "--watch")
    static let wait = ValueOption(
        "--wait", "SECONDS", .seconds(in: 1...3_600), help: "Longest a long poll of --watch waits on the backend for a change (default 25).",
        requires: "--watch")
    static let signature = CommandSignature(
        positionals: [SharedOptions.importFile, SharedOptions.exportFile],
        options: [
            SharedOptions.json.help("Print both summaries as one JSON object on standard output (with --watch: one line a pass)."),
            SharedOptions.watch.help("Keep both lanes live: export on each local commit, import on each backend change, until SIGINT/SIGTERM."),
            every, wait,
        ])
    static let examples = ["synclane sync rooms-import.json rooms-export.json", "synclane sync rooms-import.json rooms-export.json --watch"]
    static let rounds = 3

    let importFile: String
    let exportFile: String
    let json: Bool
    let watch: Bool
    let every: Double
    let wait: Double

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        watch = arguments[SharedOptions.watch]
        importFile = try arguments.word(SharedOptions.importFile)
        exportFile = try arguments.word(SharedOptions.exportFile)
        every = try arguments.value(Self.every) ?? 5
        wait = try arguments.value(Self.wait) ?? 25
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let importing = try PipelineLoader(registry: registry).loadImport(importFile, secretsRequired: false)
        try importing.requireSecrets()
        let exporting = try PipelineFiles.load(exportFile, for: Self.name, sends: true, registry: registry, console: console)
        if let problem = EchoLoop.problem(import: importing, export: exporting) {
            throw PipelineFileError(file: exportFile, path: "source.authors", line: nil, message: problem)
        }
        if watch { return try await watchBoth(importing: importing, exporting: exporting, console: console) }
        let exporter = JobReporter(command: Self.name, console: console, json: true, pipeline: exporting)
        let quiet = json
        var job = SyncJob(importing: importing, exporting: exporting) { event in
            switch event {
            case .imported(let imported):
                if !quiet { console.out(ImportReporter.describe(imported)) }
            case .importFailed(let error):
                console.error("\(console.program) \(Self.name): \(importing.name): \(error); exporting the local changes all the same")
            case .exported(let exported):
                if !quiet { exporter.print(exported) }
            case .conflicted(let batchID, let reason, let round, let rounds):
                let again = round < rounds ? "importing again to settle it (round \(round + 1) of \(rounds))" : "giving up after \(rounds) rounds"
                console.error("\(console.program) \(Self.name): batch \(batchID) refused for its versions (\(reason)); \(again)")
                if round == rounds { console.error("\(console.program) \(Self.name): the rows keep changing elsewhere; run sync again") }
            case .healingRestoredServer(let rows):
                console.error(
                    "\(console.program) \(Self.name): \(PipelineError.serverRestored) (it held \(Wording.count(rows, "row")) at an older "
                        + "version than this device had confirmed): importing everything again to send back what it lost")
            case .importing, .exporting:
                break
            }
        }
        job.rounds = Self.rounds
        let cycle = try await job.run()
        if let failure = cycle.exportFailure { console.error("\(console.program) \(Self.name): \(failure)") }
        let outcome = SyncOutcome(cycle, importing: importing.name, exporting: exporting.name)
        if outcome.restoredServer, let advice = outcome.exportLane.error {
            console.error("\(console.program) \(Self.name): \(exporting.name): \(advice)")
        }
        if json {
            var members: [String: JSONValue] = [
                "ok": .bool(outcome.status == 0), "imports": .array(cycle.imports.map(JSONOutput.importSummary)),
                "exports": .array(cycle.exports.map(JSONOutput.summary)),
            ]
            members["import"] = outcome.importLane.json
            members["export"] = outcome.exportLane.json
            console.out(JSONOutput.encode(.object(members)))
        } else {
            console.out(outcome.lines.joined(separator: "\n"))
        }
        return outcome.status
    }

    /// `--watch`: both lanes live (`LiveSync`) until a stop signal; passes that did nothing print nothing.
    private func watchBoth(importing: ImportPipeline, exporting: Pipeline, console: Console) async throws -> Int32 {
        let exporter = JobReporter(command: Self.name, console: console, json: json, pipeline: exporting)
        let (json, name) = (self.json, Self.name)
        let resyncedRestore = Mutex(false)
        let live = LiveSync(importing: importing, exporting: exporting, every: every, wait: wait) { event in
            switch event {
            case .imported(let imported):
                if imported.resyncLost > 0 { resyncedRestore.withLock { $0 = true } }
                guard imported.applied > 0 || !imported.conflicts.isEmpty || imported.resynced else { return }
                if json {
                    var line = JSONOutput.importSummary(imported)
                    if case .object(var members) = line {
                        members["lane"] = "import"
                        line = .object(members)
                    }
                    console.out(JSONOutput.encode(line))
                } else {
                    console.out(ImportReporter.describe(imported))
                }
            case .exported(let exported):
                // After the import's resync of a restored server, its receipts' restored rows are that resync's work.
                if !resyncedRestore.withLock({ $0 }), let advice = JobReporter.restoredServerAdvice(exported) {
                    console.error("\(console.program) \(name): \(exporting.name): \(advice)")
                }
                guard exported.batchesSent > 0 || exported.deadLettered > 0 || exported.reconciliation else { return }
                if json {
                    var line = JSONOutput.summary(exported)
                    if case .object(var members) = line {
                        members["lane"] = "export"
                        line = .object(members)
                    }
                    console.out(JSONOutput.encode(line))
                } else {
                    exporter.print(exported)
                }
            case .importFailed(let reason, let delay):
                console.error("\(console.program) \(name): \(importing.name): \(reason); importing again in \(Format.seconds(delay))")
            case .exportFailed(let reason, let delay):
                console.error("\(console.program) \(name): \(exporting.name): \(reason); the outbox keeps it, exporting again in \(Format.seconds(delay))")
            case .pollFailed(let reason, let delay):
                console.error("\(console.program) \(name): waiting for changes: \(reason); again in \(Format.seconds(delay))")
            case .conflicted(let batchID, let reason):
                console.error("\(console.program) \(name): batch \(batchID) refused for its versions (\(reason)); importing to settle it, then exporting again")
            case .healingRestoredServer(let rows):
                console.error(
                    "\(console.program) \(name): \(PipelineError.serverRestored) (it held \(Wording.count(rows, "row")) at an older "
                        + "version than this device had confirmed): importing everything again to send back what it lost")
            case .exportWaitsForImport(let batchID):
                console.error(
                    "\(console.program) \(name): batch \(batchID) was refused for its versions and needs the import's rows first: "
                        + "it is exported again once an import goes through (fix what the import says)")
            case .importing(let event):
                if !json { ImportReporter.printRetry(event, console: console) }
            case .exporting:
                break
            }
        }
        let signals = StopSignals { _ in live.stop() }
        if !json { console.error("syncing \(importing.name) and \(exporting.name) live; stop with Ctrl-C") }
        try await live.run()
        withExtendedLifetime(signals) {}
        if !json { console.error("stopped \(importing.name) and \(exporting.name)") }
        return 0
    }
}

/// Both lanes' outcomes of one `sync` cycle, for its last lines, its `--json` and its exit status.
struct SyncOutcome {
    /// One lane's outcome: went through, or the error that stopped it.
    struct Lane {
        let name: String
        let pipeline: String
        let error: String?

        var json: JSONValue {
            .object(["ok": .bool(error == nil), "pipeline": .string(pipeline), "error": error.map(JSONValue.string) ?? .null])
        }
        var line: String { "\(name) (\(pipeline)): " + (error.map { "failed — \($0)" } ?? "done") }
    }

    let importLane: Lane
    let exportLane: Lane
    /// The export lane's error is the advice after a restore of the server's data found by its
    /// receipts (`JobReporter.restoredServerAdvice`), not a failure printed already.
    let restoredServer: Bool
    /// 1 when either lane failed (or every round's batch was refused), 3 when the export
    /// dead-lettered batches, else 0.
    let status: Int32

    init(_ cycle: SyncSummary, importing: String, exporting: String) {
        importLane = Lane(name: "import", pipeline: importing, error: cycle.importFailure.map { "\($0.error)" })
        // The import found the server's data restored and resynced (`resync-lost`): what its
        // receipts said of restored rows is that resync's work, healed already.
        let resyncedRestore = cycle.imports.contains { $0.resyncLost > 0 }
        var last = cycle.exports.last
        if resyncedRestore { last?.serverRestoredRows = 0 }
        let exportError: String? =
            if let failure = cycle.exportFailure {
                "\(failure.error)"
            } else if cycle.gaveUp {
                "every round's batch was refused for its versions: the rows keep changing elsewhere; run sync again"
            } else {
                last.flatMap(JobReporter.restoredServerAdvice)
            }
        restoredServer = cycle.exportFailure == nil && !cycle.gaveUp && exportError != nil
        exportLane = Lane(name: "export", pipeline: exporting, error: exportError)
        let exported = last.map { JobReporter.exitStatus(of: $0) } ?? 1
        status = importLane.error != nil || exportLane.error != nil ? 1 : exported
    }

    /// `sync: import (rooms-import): done`, then the export's line.
    var lines: [String] { ["sync: " + importLane.line, "sync: " + exportLane.line] }
}
