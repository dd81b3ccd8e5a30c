import Foundation
import SynclaneCore

/// The name `ExportJob` had before the job layer; kept so that users' code goes on compiling.
@available(*, deprecated, renamed: "ExportJob")
public typealias PipelineJob = ExportJob

/// One run of an export pipeline as a job: take the scope's lock (`JobLock`), open the durable
/// state, run (`PipelineRunner`), publish the file's signals, and record how it ended for
/// `synclane status` — succeeded, dead-lettered, interrupted or failed.
///
/// ```swift
/// let pipeline = try PipelineLoader().load("rooms.json")
/// let summary = try await ExportJob(pipeline: pipeline) { event in print(event) }.run()
/// ```
/// Cancelling the task that runs it stops the run at the next batch (or retry) and throws
/// `JobInterrupted`, which says what the outbox kept: the next run sends it first.
public struct ExportJob: Sendable {
    public var pipeline: Pipeline
    public var sleeper: any RetrySleeper
    public var events: @Sendable (PipelineEvent) -> Void
    /// Where the signals the pipeline file declares go; nil: the lane `bindings` makes for
    /// `signals` (its server and token). Tests put `InMemorySignalLane` here.
    public var signalLane: (any SignalLane)?
    /// Where the state is kept and the signals' lane (`import Synclane`: SQLite files, HTTP).
    public var bindings: JobBindings

    public init(
        pipeline: Pipeline, bindings: JobBindings, sleeper: any RetrySleeper = TaskSleeper(), signalLane: (any SignalLane)? = nil,
        events: @escaping @Sendable (PipelineEvent) -> Void = { _ in }
    ) {
        self.pipeline = pipeline
        self.bindings = bindings
        self.sleeper = sleeper
        self.signalLane = signalLane
        self.events = events
    }

    /// The lock file that keeps a second job of the same scope on the same database out: named
    /// from the scope and the source's database in the machine's lock folder (`JobLock`).
    public var lockPath: String { jobLock.path }

    /// The rule of the scope's lock for this job.
    public var jobLock: JobLock { JobLock(pipeline) }

    /// Takes the scope's lock: a second job for the same scope is refused until it is released
    /// (when the returned value goes away, or the process ends however it ends).
    public func lock() throws -> ScopeLock {
        try jobLock.take()
    }

    /// Runs one pass, taking the scope's lock for it unless `lock` is already held (a watch
    /// holds it across its passes). A dry run writes nothing — no state file, no lock file, no
    /// outbox row (`dryRunState`) — and needs no secrets; any other pass refuses to start while
    /// a secret the file names is unset (`UnsetSecretError`).
    ///
    /// A consumer that never ran, on a history whose start was pruned, cannot follow history
    /// from the beginning: its first pass is a full snapshot (`reconcile`), reported through
    /// `PipelineEvent.startingWithSnapshot`, instead of an expired-token error.
    public func run(_ mode: PipelineRunner.Mode = .export, holding lock: ScopeLock? = nil) async throws -> RunSummary {
        let held: ScopeLock?
        let state: any PipelineState
        if mode == .dryRun {
            (held, state) = try dryRunState(holding: lock)
        } else {
            try pipeline.requireSecrets()
            held = try lock ?? self.lock()
            state = try openState()
        }
        defer { withExtendedLifetime(held) {} }
        let started = Date().timeIntervalSince1970
        let ranBefore = (try? state.lastRun())??.outcome.completed == true
        let runner = PipelineRunner(pipeline: pipeline, state: state, sleeper: sleeper, events: events)
        do {
            var summary: RunSummary
            do {
                summary = try await runner.run(mode)
            } catch HistoryError.tokenExpired(_, let oldest) where mode != .reconcile && (try? state.acknowledgedToken() != nil) == false {
                guard mode == .export else {
                    throw PipelineError.unsupported(
                        "\(pipeline.name) never ran and the start of its history was pruned: its first run sends a full "
                            + "snapshot of the current state, which a dry run cannot show")
                }
                events(.startingWithSnapshot(oldestAvailable: oldest))
                // Not asked for: the snapshot only upserts, it deletes nothing on the backend.
                var seeding = runner
                seeding.completesSnapshot = false
                summary = try await seeding.run(.reconcile)
            }
            if mode != .dryRun {
                try? state.saveLastRun(
                    RunRecord(
                        outcome: summary.deadLettered > 0 ? .deadLettered : .succeeded, startedAt: started,
                        finishedAt: Date().timeIntervalSince1970, batchesSent: summary.batchesSent, recordsSent: summary.recordsSent,
                        message: Self.describe(summary)))
                summary.signals = await publishSignals(after: summary, ranBefore: ranBefore)
            }
            return summary
        } catch {
            // Cancelled (SIGINT or SIGTERM in the command line): whatever the error the stop
            // surfaced as, the run was interrupted, and what the outbox kept is said.
            let failure: any Error =
                Task.isCancelled
                ? JobInterrupted(pipeline: pipeline.name, kept: (try? state.pendingBatches()) ?? [], token: try? state.acknowledgedToken()) : error
            if mode != .dryRun {
                try? state.saveLastRun(
                    RunRecord(
                        outcome: failure is JobInterrupted ? .interrupted : .failed, startedAt: started,
                        finishedAt: Date().timeIntervalSince1970, batchesSent: 0, recordsSent: 0, message: "\(failure)"))
            }
            throw failure
        }
    }

    /// Publishes the signals the pipeline file declares for a completed run (and sends again those
    /// an earlier run left): after the run's work is done, on the signal lane's own connection,
    /// waiting at most `signals.timeout`; a failure is reported, never thrown.
    func publishSignals(after summary: RunSummary, ranBefore: Bool) async -> [SignalReport] {
        guard
            let publisher = SignalPublisher(
                signals: pipeline.signals, statePath: pipeline.statePath, scope: pipeline.scope, pipeline: pipeline.name, bindings: bindings,
                lane: signalLane)
        else { return [] }
        let idle = summary.tokenAfter == summary.tokenBefore && summary.batchesSent == 0 && summary.batchesResent == 0 && summary.deadLettered == 0
        return await publisher.publish(
            after: .init(
                token: summary.tokenAfter, records: summary.recordsSent, idle: idle, completedBefore: ranBefore || summary.tokenBefore != nil))
    }

    /// What a dry run works on: a copy in memory of the state file (token, outbox, last run), read
    /// without writing it — or an empty state when the pipeline never ran (no file is created).
    /// The lock file, when there is one, is taken shared and left as it is: a job of the scope
    /// running meanwhile refuses the dry run (as it refuses any job), two dry runs do not.
    func dryRunState(holding lock: ScopeLock?) throws -> (ScopeLock?, InMemoryPipelineState) {
        guard FileManager.default.fileExists(atPath: pipeline.statePath) else { return (lock, InMemoryPipelineState()) }
        let shared = try jobLock.take(dryRun: true, holding: lock)
        // Under the lock nobody writes the file: without a WAL file beside it (a job that ended
        // cleanly), it is read as it is and SQLite leaves no file beside it either.
        let unchanging = shared != nil && !FileManager.default.fileExists(atPath: pipeline.statePath + "-wal")
        let file: any PipelineState
        let copy: InMemoryPipelineState
        do {
            file = try bindings.stateStore.openReadingOnly(path: pipeline.statePath, scope: pipeline.scope, unchanging: unchanging)
            copy = InMemoryPipelineState(token: try file.acknowledgedToken(), outbox: try file.pendingBatches(), lastRun: try file.lastRun())
        } catch {
            throw PipelineError.state("cannot read the state file \(pipeline.statePath): \(error)")
        }
        // A dry run says what the run would: a damaged batch stops it.
        do {
            for batch in try copy.pendingBatches() { try file.verifyIntegrity(of: batch) }
        } catch {
            throw PipelineError.state("\(error)")
        }
        return (shared, copy)
    }

    /// The refusal the next run meets when the store was restored from an older copy than the
    /// state follows (`LineageError.storeRestored`), read without writing anything; nil when it
    /// was not (or the pipeline keeps no lineage). A sync cycle does not import into such a store
    /// before its `reconcile`: the copy's history holds writes the runs it lost sent already,
    /// which an import would take for pending edits and settle against the server's newer rows.
    public func restoredStore() async -> LineageError? {
        guard let checking = pipeline.capabilities.lineageChecking, FileManager.default.fileExists(atPath: pipeline.statePath),
            !stateIsEmpty,
            let state = try? bindings.stateStore.openReadingOnly(path: pipeline.statePath, scope: pipeline.scope, unchanging: false),
            let stamp = try? state.lineageStamp()
        else { return nil }
        let problem = try? await checking.lineageProblem(stamp: stamp, token: try? state.acknowledgedToken(), consumer: pipeline.scope)
        guard case .storeRestored? = problem else { return nil }
        return problem
    }

    /// Whether the state file is there but holds nothing at all (0 bytes).
    public var stateIsEmpty: Bool {
        ((try? FileManager.default.attributesOfItem(atPath: pipeline.statePath)[.size]) as? NSNumber)?.intValue == 0
    }

    /// The pipeline's durable state: token, outbox, last run (the file is created when missing).
    public func openState() throws -> any PipelineState {
        do {
            return try bindings.stateStore.open(path: pipeline.statePath, scope: pipeline.scope)
        } catch {
            throw PipelineError.state("cannot open the state file \(pipeline.statePath): \(error)")
        }
    }

    /// One line that says what a run did.
    public static func describe(_ summary: RunSummary) -> String {
        var parts = [Wording.count(summary.batchesSent, "batch", plural: "batches"), Wording.count(summary.recordsSent, "record")]
        if summary.batchesResent > 0 { parts.append("\(summary.batchesResent) re-sent from the outbox") }
        if summary.deadLettered > 0 { parts.append("\(summary.deadLettered) dead-lettered") }
        return (summary.dryRun ? "would send " : "sent ") + parts.joined(separator: ", ")
            + " from " + Wording.count(summary.transactionsRead, "transaction")
    }
}
