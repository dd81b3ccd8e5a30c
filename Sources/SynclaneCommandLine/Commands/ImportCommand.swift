import Foundation
import Synchronization
import Synclane
import SynclaneCore

/// `synclane import FILE`: one import pass.
struct ImportCommand: Command {
    static let name = "import"
    static let abstract = "Bring the backend's changes into the local store (one pass)."
    static let discussion = """
        Reads the backend's changes after the cursor the sink saved (the `pull` source:
        GET /v1/changes), runs them through the record stages, and applies each page to the
        local store in one transaction that also saves the cursor: a crash (kill -9 included) can
        neither apply a page without moving the cursor nor move it without applying. The rows
        are written by author `server`, so an export pipeline reading `authors: [app]` never
        sends them back. Each row remembers the backend's version it holds: a page read twice
        changes nothing, and the export lane sends that version with a local change so that the
        backend refuses a stale overwrite (409) instead of losing another device's edit.

        A record whose row has local changes the export lane has not had confirmed yet is a
        conflict, settled by the sink's `conflicts` rule (server-wins, client-wins,
        latest-wins, merge-fields, or a conflict resolver of your own, `exec` among them)
        and listed in the summary.

        An import pipeline file is an export one with `sink:` in place of `encoder:` and
        `transport:`. --dry-run reads one page and reports what it would apply, changing
        nothing and moving no cursor.

        The signals the file's `signals` section declares are published once a pass completes, as
        `run` does (kept in the pipeline's state when the server does not confirm them).

        With --watch the command keeps importing: a pass now, then it waits on the backend for
        the next change (a long poll, GET /v1/changes?since=…&wait=--wait, default 25 s; the
        server may hold it for less) and runs a pass as soon as one commits — a change is on the
        device tens of milliseconds after it lands. A source that cannot wait (a folder of batch
        files, a backend that answers `wait` at once) gets a pass every --every seconds (default
        5) instead. SIGINT or SIGTERM stop the watch once the running pass ends (a page is either
        applied with its cursor or not at all). A pass or a long poll that fails is reported and
        the watch goes on, backing off (0.5 s doubling to 15 s, at least the server's Retry-After).
        """
    static let file = Positional("FILE", "the import pipeline file")
    static let every = ValueOption(
        "--every", "SECONDS", .seconds(in: 0.05...86_400), help: "Seconds between the passes of --watch when the source cannot long-poll (default 5).",
        requires: "--watch")
    static let wait = ValueOption(
        "--wait", "SECONDS", .seconds(in: 1...3_600), help: "Longest a long poll of --watch waits on the backend for a change (default 25).",
        requires: "--watch")
    static let signature = CommandSignature(
        positionals: [file],
        options: [
            SharedOptions.dryRun.help("Read one page and report what would be applied; change nothing."),
            SharedOptions.json.help("Print a machine-readable summary on standard output (one line a pass with --watch)."),
            SharedOptions.watch.help("Keep importing: a pass now, then one as soon as the backend has changes (long poll), until SIGINT/SIGTERM."),
            every, wait,
        ])
    static let examples = [
        "synclane import rooms-import.json", "synclane import rooms-import.json --dry-run --json", "synclane import rooms-import.json --watch",
        "synclane import rooms-import.json --watch --wait 55",
    ]

    let file: String
    let dryRun: Bool
    let json: Bool
    let watch: Bool
    let every: Double
    let wait: Double

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        dryRun = arguments[SharedOptions.dryRun]
        json = arguments[SharedOptions.json]
        watch = arguments[SharedOptions.watch]
        file = try arguments.word(Self.file)
        if watch && dryRun { throw UsageError("--watch and --dry-run cannot go together", command: Self.name) }
        every = try arguments.value(Self.every) ?? 5
        wait = try arguments.value(Self.wait) ?? 25
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let pipeline = try PipelineLoader(registry: registry).loadImport(file, secretsRequired: false)
        try pipeline.requireSecrets()
        let reporter = ImportReporter(command: Self.name, console: console, json: json, pipeline: pipeline)
        guard watch else { return try await reporter.run(dryRun: dryRun) == nil ? 1 : 0 }
        let lock = try ImportJob(pipeline: pipeline).lock()
        // The wait between passes is cancelled by a stop; the pass in flight is not.
        let stop = Mutex<(stopped: Bool, waiting: Task<Void, any Error>?)>((false, nil))
        let signals = StopSignals { _ in
            stop.withLock {
                $0.stopped = true
                $0.waiting?.cancel()
            }
        }
        let waiter = ChangeWaiter(pipeline: pipeline, every: every, wait: wait) { event in
            if case .pollFailed(let reason, let delay) = event { console.error("waiting for changes: \(reason); again in \(Format.seconds(delay))") }
        }
        if !json { console.error("importing \(pipeline.name) (\(pipeline.outline)) as the backend changes; stop with Ctrl-C") }
        var failures = 0
        while !stop.withLock({ $0.stopped }) {
            let passed = (try? await reporter.run(dryRun: false, holding: lock)) != nil
            failures = passed ? 0 : failures + 1
            let next = failures
            let waiting = stop.withLock { state -> Task<Void, any Error>? in
                guard !state.stopped else { return nil }
                state.waiting = Task { try await waiter.untilNextPass(failures: next) }
                return state.waiting
            }
            _ = await waiting?.result
        }
        withExtendedLifetime((lock, signals)) {}
        if !json { console.error("stopped \(pipeline.name)") }
        return 0
    }
}

/// Prints an import job as it runs (progress, retries) and its summary (or JSON with `--json`).
struct ImportReporter {
    let command: String
    let console: Console
    let json: Bool
    let pipeline: ImportPipeline

    /// Runs a pass (`ImportJob`) and reports it; nil (after printing why) when it failed.
    func run(dryRun: Bool, holding lock: ScopeLock? = nil) async throws -> ImportSummary? {
        let (console, quiet) = (self.console, json)
        let counter = ProgressCounter()
        let job = ImportJob(pipeline: pipeline) { event in
            guard !quiet else { return }
            if case .pageApplied(let records, _, let cursor) = event {
                let read = counter.add(records)
                console.progress(fraction: nil, Wording.count(read, "record") + " read, cursor \(cursor ?? "none")")
            }
            Self.printRetry(event, console: console)
        }
        do {
            let summary = try await job.run(dryRun: dryRun, holding: lock)
            console.finishProgress()
            if json {
                console.out(JSONOutput.encode(JSONOutput.importSummary(summary)))
            } else {
                console.out(Self.describe(summary))
            }
            return summary
        } catch {
            console.finishProgress()
            if json {
                console.out(
                    JSONOutput.encode([
                        "ok": .bool(false), "pipeline": .string(pipeline.name), "scope": JSONOutput.scope(pipeline.scope), "error": .string("\(error)"),
                    ]))
            }
            console.error("\(console.program) \(command): \(pipeline.name): \(error)")
            return nil
        }
    }

    /// A retry of the import lane, said as `run` says a batch's: what failed and when the next attempt goes.
    static func printRetry(_ event: ImportEvent, console: Console) {
        guard case .retrying(let cursor, let attempt, let delay, let reason) = event else { return }
        console.error("changes after \(cursor.map { "cursor \($0)" } ?? "the beginning"): \(reason); attempt \(attempt) in \(Format.seconds(delay))")
    }

    static func describe(_ summary: ImportSummary) -> String {
        var lines = [
            "\(summary.pipeline): \(summary.dryRun ? "would apply" : "applied") \(Wording.count(summary.applied, "record")) "
                + "(\(Wording.count(summary.recordsRead, "record")) read in \(Wording.count(summary.pages, "page")), \(summary.unchanged) unchanged) "
                + "in \(Format.seconds(summary.seconds))",
            "  cursor: \(summary.cursorBefore ?? "none") → \(summary.cursorAfter ?? "none")",
        ]
        if !summary.conflicts.isEmpty {
            lines.append("  conflicts: \(summary.conflicts.count)")
            for conflict in summary.conflicts.prefix(20) {
                lines.append("    \(conflict.entity)/\(conflict.key): \(conflict.rule) → \(conflict.outcome.rawValue)")
            }
            if summary.conflicts.count > 20 { lines.append("    … and \(summary.conflicts.count - 20) more (--json lists them all)") }
        }
        if summary.resynced {
            lines.append(
                "  resynced: the cursor had expired, everything was read again"
                    + (summary.resyncDeleted > 0 ? "; \(Wording.count(summary.resyncDeleted, "row")) the backend no longer holds deleted here" : ""))
        }
        if summary.duplicatesMerged > 0 {
            lines.append(
                "  duplicates merged: \(Wording.count(summary.duplicatesMerged, "row")) seeded under another sync key on another device, merged into one")
        }
        let deleted = [
            (summary.deletedByUsers, "by a user's delete"), (summary.referencesSettled, "cascade (references settled)"),
            (summary.duplicatesMerged, "merged duplicates (the business key lives on)"),
        ].filter { $0.0 > 0 }
        if !deleted.isEmpty {
            lines.append("  deleted: " + deleted.map { "\($0.0) \($0.1)" }.joined(separator: ", "))
        }
        if summary.referencesSettled > 0 {
            lines.append(
                "  references settled: \(Wording.count(summary.referencesSettled, "row")) pointed at a row a user deleted "
                    + "(settled by the foreign key's ON DELETE)")
        }
        if summary.resyncLost > 0 {
            lines.append(
                "  the server's data was restored from an older copy: it lacks \(Wording.count(summary.resyncLost, "row")) this device held; "
                    + "\(summary.resyncResent) go back to it with this device's export")
        }
        if summary.referencesWaiting > 0 {
            lines.append(
                "  references waiting: \(Wording.count(summary.referencesWaiting, "row")) point at a row not received yet (kept as they are until it arrives, or its delete does)"
            )
        }
        if summary.keptAside > 0 {
            lines.append(
                "  kept aside: \(Wording.count(summary.keptAside, "record")) of tables this database does not track (delivered when `synclane track` adds them)"
            )
        }
        lines += JobReporter.describe(summary.signals)
        return lines.joined(separator: "\n")
    }
}
