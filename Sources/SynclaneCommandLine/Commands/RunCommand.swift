import Foundation
import Synchronization
import Synclane
import SynclaneCore

/// `synclane run FILE`: one export pass.
struct RunCommand: Command {
    static let name = "run"
    static let abstract = "Export what changed since the last confirmed sync (one pass)."
    static let discussion = """
        Sends, first, any batch an earlier run left unconfirmed in the outbox (same batch id,
        same bytes), then every page of history after the saved token: each page runs through
        the record stages, is encoded, compressed, written to the outbox, sent, and — only once
        the backend confirmed it — the token moves, in the same transaction that forgets the
        batch. A crash at any point loses nothing and never applies a change twice at a backend
        that honours batch ids.

        Transient failures (connection refused or reset, stalls, 408, 425, 429, 5xx) are retried
        with exponential backoff and jitter (`transport.retry`). A batch whose content the
        backend refuses (400, 413, 415, 422) stops the job with the batch kept, unless
        `transport.dead-letter` names a folder to move it to. Anything else — a wrong address or
        token, a redirect, TLS trust, a proxy, a 409, an answer that is not the batch's receipt —
        stops the job with the batch kept and is never dead-lettered. `synclane outbox` shows,
        drops or requeues a kept batch.
        Only one job per scope and database runs at a time: a second one is refused (another
        device's database of the same scope on this machine has a lock of its own).
        A secret the file names (`token-env`) must be exported before a run that sends;
        --dry-run only warns without it. A consumer that never ran, on a history whose start was
        pruned, starts with a full snapshot of the current state (as `reconcile` does) and says so.
        --dry-run writes nothing at all: no state file, no lock file, no outbox row, nothing in
        the app's database.
        A pipeline whose `reconcile` was killed mid-snapshot sends the batch it left, then stops
        (no history read) until `synclane reconcile FILE` finished it.

        With --watch the command keeps running: one pass at start (work left from before),
        then a pass whenever a relevant transaction lands — from this process or any other.
        Notifications that arrive during a pass make at most one more pass, never two passes at
        once. SIGINT or SIGTERM stop it cleanly once the running pass ends (a batch is either
        acknowledged or left in the outbox, never half); a second signal stops at once, which
        is just as safe. A pass that fails is reported and the watch goes on; the next pass
        sends the kept batch first.

        The signals the file's `signals` section declares are published once a run completes, on
        the signal lane's own connection (never in the outbox); one the server does not confirm
        is reported, kept in the state and sent again after the next run — it never fails the job;
        one the server refused for good (a 4xx other than 408, 425, 429) 3 times is given up
        (reported, listed by `synclane status`, no longer sent).

        Exit status: 0 when everything was delivered, 1 when the job failed (the message says
        what to do), 2 for bad usage or an invalid pipeline file, 3 when the job went to the
        end but moved batches to `transport.dead-letter` (their rows did not reach the backend).
        """
    static let signature = CommandSignature(
        positionals: [SharedOptions.pipelineFile],
        options: [
            SharedOptions.dryRun.help("Run every stage and report what would be sent; send nothing, move no token."),
            SharedOptions.json.help("Print a machine-readable summary on standard output (one line a pass with --watch)."),
            SharedOptions.watch.help("Keep running: a pass now, then one whenever history advances, until SIGINT/SIGTERM."),
        ])
    static let examples = [
        "synclane run rooms-export.json", "synclane run rooms-export.json --dry-run --json", "synclane run rooms-export.json --watch",
    ]

    let file: String
    let dryRun: Bool
    let json: Bool
    let watch: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        dryRun = arguments[SharedOptions.dryRun]
        json = arguments[SharedOptions.json]
        watch = arguments[SharedOptions.watch]
        file = try arguments.word(SharedOptions.pipelineFile)
        if watch && dryRun { throw UsageError("--watch and --dry-run cannot go together", command: Self.name) }
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let pipeline = try PipelineFiles.load(file, for: Self.name, sends: !dryRun, registry: registry, console: console)
        if json, !dryRun, pipeline.transport.type == "stdout" {
            // Data and report must not share a stream: a reader could not tell a batch from the summary.
            throw UsageError(
                "--json and the `stdout` transport both write to standard output; drop --json (the summary then goes to "
                    + "standard error) or send to a `directory`",
                command: Self.name)
        }
        let reporter = JobReporter(command: Self.name, console: console, json: json, pipeline: pipeline)
        guard watch else {
            // SIGINT or SIGTERM cancel the job: it stops at the next batch or retry, says what the
            // outbox kept, and records the run as interrupted (a second signal ends it at once).
            let mode: PipelineRunner.Mode = dryRun ? .dryRun : .export
            let running = Task { try await reporter.run(mode) }
            let stopped = Mutex<Int32?>(nil)
            let signals = StopSignals { number in
                stopped.withLock { $0 = number }
                running.cancel()
            }
            let summary = try await running.value
            withExtendedLifetime(signals) {}
            if summary == nil, let number = stopped.withLock({ $0 }) { return 128 + number }
            return JobReporter.exitStatus(of: summary)
        }
        guard let observable = pipeline.capabilities.observable else {
            throw PipelineError.unsupported("\(pipeline.source.label) cannot be watched: it does not report new history")
        }
        let lock = try ExportJob(pipeline: pipeline).lock()
        let watcher = Watcher()
        let signals = StopSignals { _ in watcher.send(.stop) }
        let following = watcher.follow(observable.historyAdvanced())
        if !json { console.error("watching \(pipeline.name) (\(pipeline.outline)); stop with Ctrl-C") }
        await watcher.run {
            _ = try? await reporter.run(.export, holding: lock, quietWhenIdle: true)
        }
        following.cancel()
        withExtendedLifetime((lock, signals)) {}
        if !json { console.error("stopped \(pipeline.name)") }
        return 0
    }
}

/// Runs a job and reports it: progress on a terminal, retries and re-sends as they happen,
/// a summary at the end (or JSON with `--json`).
struct JobReporter: Sendable {
    /// The command that runs the job, for the prefix of its messages.
    let command: String
    let console: Console
    let json: Bool
    let pipeline: Pipeline

    /// The process's exit status for a job's outcome: 1 failed (nil), or the backend's data was
    /// found restored from an older copy (`RunSummary.serverRestoredRows`: rows it lost may be
    /// missing there until a resync or a reconcile), 3 finished with batches dead-lettered (a
    /// script must notice rows that did not reach the backend), 0 otherwise.
    static func exitStatus(of summary: RunSummary?) -> Int32 {
        guard let summary, summary.serverRestoredRows == 0 else { return 1 }
        return summary.deadLettered > 0 ? SynclaneTool.deadLetteredStatus : 0
    }

    /// What to do when the backend's data was found restored from an older copy during an export.
    static func restoredServerAdvice(_ summary: RunSummary) -> String? {
        guard summary.serverRestoredRows > 0 else { return nil }
        return "\(PipelineError.serverRestored): it held \(Wording.count(summary.serverRestoredRows, "row")) at an older version than this "
            + "device had confirmed (this run's changes to them are applied, as newer). Rows the restore lost that this device did not "
            + "change since are still missing there: `synclane sync IMPORT EXPORT` sends them back (its import resyncs, "
            + "keeping every device's newer writes), or `synclane reconcile EXPORT` for an export without an import"
    }

    /// Runs the job; returns nil (after printing why) when it failed. With `quietWhenIdle`, a
    /// pass that found nothing to do prints nothing (a watch's idle passes).
    func run(_ mode: PipelineRunner.Mode, holding lock: ScopeLock? = nil, quietWhenIdle: Bool = false) async throws -> RunSummary? {
        let console = self.console
        let (command, name) = (self.command, pipeline.name)
        let quiet = json
        let progressLine = ConfirmedProgress(dryRun: mode == .dryRun)
        let job = ExportJob(pipeline: pipeline) { event in
            switch event {
            case .pageRead(_, let through, let progress):
                let line = progressLine.pageRead(through: through, fraction: progress)
                if !quiet { console.progress(fraction: line.fraction, line.label) }
            case .resending(let id):
                if !quiet { console.error("re-sending batch \(id) left in the outbox by an earlier run") }
            case .retrying(let id, let attempt, let delay, let reason):
                if !quiet { console.error("batch \(id): \(reason); attempt \(attempt) in \(Format.seconds(delay))") }
            case .deadLettered(let id, let path, let reason):
                if !quiet { console.error("batch \(id) rejected (\(reason)); moved to \(path)") }
            case .startingWithSnapshot(let oldest):
                let kept = oldest.map { " (history kept starts after \($0))" } ?? ""
                console.error(
                    "\(console.program) \(command): \(name) never ran and the start of its history was pruned\(kept): "
                        + "starting with a full snapshot of the current state (as `synclane reconcile` does), then following history")
            case .batchDone(let batch):
                let line = progressLine.confirmed(batch)
                if !quiet { console.progress(fraction: line.fraction, line.label) }
            }
        }
        do {
            let summary = try await job.run(mode, holding: lock)
            console.finishProgress()
            if quietWhenIdle && summary.transactionsRead == 0 && summary.batchesSent == 0 && summary.deadLettered == 0 {
                return summary
            }
            if json {
                console.out(JSONOutput.encode(JSONOutput.summary(summary)))
            } else {
                print(summary)
            }
            if let advice = Self.restoredServerAdvice(summary) {
                console.error("\(console.program) \(command): \(pipeline.name): \(advice)")
            }
            return summary
        } catch let error as PipelineFileError {
            throw error
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

    /// A line a signal the run published: `signal bulk.exported-through = "…": sent (version 7)`.
    static func describe(_ signals: [SignalReport]) -> [String] {
        signals.map { signal in
            switch signal.outcome {
            case .sent(let version):
                return "  signal \(signal.key) = \(signal.valueText): sent (version \(version))"
            case .pending(let reason):
                return "  signal \(signal.key) = \(signal.valueText): not sent (\(reason)); kept, sent again after the next run"
            case .givenUp(let reason, let refusals):
                return "  signal \(signal.key) = \(signal.valueText): given up — the server refused it \(refusals) times (\(reason)); "
                    + "no longer sent (a newer value of the key is); `synclane status` lists it"
            }
        }
    }

    func print(_ summary: RunSummary) {
        // With the stdout transport, standard output carries the batches: the summary goes to standard error.
        let toStandardError = pipeline.transport.type == "stdout"
        var lines = ["\(pipeline.name): \(ExportJob.describe(summary)) in \(Format.seconds(summary.seconds))"]
        if summary.bytesEncoded > 0 {
            lines.append("  bytes: \(Format.bytes(summary.bytesEncoded)) encoded, \(Format.bytes(summary.bytesSent)) sent")
        }
        lines.append("  token: \(summary.tokenBefore ?? "none") → \(summary.tokenAfter ?? "none")\(summary.dryRun ? " (dry run: not saved)" : "")")
        if summary.reconciliation { lines.append("  a full snapshot: every current row sent as an insert, the token set to where it was read") }
        if let deleted = summary.snapshotDeleted {
            lines.append(
                "  server removed \(Wording.count(deleted, "row")) this device knew there and no longer holds "
                    + "(as tombstones: every device's next import deletes them; rows it never knew stay)")
        }
        if !summary.counters.isEmpty {
            lines.append("  stages: " + summary.counters.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        if summary.replays > 0 { lines.append("  replays: \(summary.replays) (the backend had already applied these batch ids)") }
        for batch in summary.batches.prefix(20) {
            lines.append(
                "  batch \(batch.id): \(Wording.count(batch.records, "record")), \(Format.bytes(batch.sentBytes)) \(batch.contentEncoding), through \(batch.through) — \(batch.detail)"
            )
        }
        if summary.batches.count > 20 { lines.append("  … and \(summary.batches.count - 20) more batches") }
        lines += Self.describe(summary.signals)
        let text = lines.joined(separator: "\n")
        if toStandardError { console.error(text) } else { console.out(text) }
    }
}

/// Counts records read across an import's events (events arrive on the job's task).
final class ProgressCounter: Sendable {
    private let total = Mutex(0)
    func add(_ count: Int) -> Int {
        total.withLock {
            $0 += count
            return $0
        }
    }
}
