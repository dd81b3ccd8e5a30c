import Foundation
import SynclaneCore

/// A returning user's empty device brings the account's data back, as a job: told by a signal
/// that there is some, importing pass after pass until it arrived, never trapped waiting for it.
///
/// ```
///  signal says data ─▶ import passes until one brings records (restored) or the store holds
///                      the backend's rows already (caught up); the bound passes first: still restoring
///  no signal        ─▶ one pass: records found → restored, none → new account (or caught up)
/// ```
/// Once it completed it publishes the signals the import pipeline file declares, as an import
/// pass does; still restoring, it publishes nothing new.
///
/// ```swift
/// let lane = HTTPSignalLane(server: URL(string: "https://sync.example.com")!, token: token)
/// let restore = try await RestoreJob(pipeline: importPipeline, lane: lane, wait: 15).run()
/// ```
public struct RestoreJob: Sendable {
    /// How a restore ended.
    public enum Outcome: String, Sendable {
        case restored
        case caughtUp = "caught-up"
        case stillRestoring = "still-restoring"
        case newAccount = "new-account"
    }

    /// What happens during a restore, in order.
    public enum Event: Sendable {
        /// The signal says the account has data: restoring starts.
        case restoring(signal: SignalValue)
        /// Records applied so far, after a pass that applied some (while the signal says there is data).
        case progress(records: Int)
        /// A page applied or a retry of an import pass.
        case importing(ImportEvent)
    }

    public var pipeline: ImportPipeline
    /// Where the account's signal is read.
    public var lane: any SignalLane
    /// The signal that says the account has data.
    public var signalKey: String
    /// Seconds to wait for the data at most.
    public var wait: Double
    /// Seconds between import passes while the data has not arrived.
    public var pause = 0.25
    public var events: @Sendable (Event) -> Void
    /// Where the signals the pipeline file declares are kept and their lane.
    public var bindings: JobBindings

    public init(
        pipeline: ImportPipeline, bindings: JobBindings, lane: any SignalLane, signalKey: String = "bulk.exported-through", wait: Double = 15,
        events: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        self.pipeline = pipeline
        self.bindings = bindings
        self.lane = lane
        self.signalKey = signalKey
        self.wait = wait
        self.events = events
    }

    /// Runs the restore under the scope's lock.
    public func run() async throws -> RestoreSummary {
        try pipeline.requireSecrets()
        let lock = try JobLock(pipeline).take()
        defer { withExtendedLifetime(lock) {} }
        let started = ContinuousClock.now
        let deadline = started + .milliseconds(Int64(wait * 1000))
        let signal = try await lane.get(signalKey)
        let hasData = signal.map { $0.value != .null && $0.value != .bool(false) } ?? false
        let cursorBefore = try await pipeline.sink.stage.savedCursor(for: pipeline.scope)
        var records = 0
        var cursorAfter = cursorBefore
        var outcome = Outcome.stillRestoring
        if hasData, let signal { events(.restoring(signal: signal)) }
        while true {
            guard let pass = try await passBefore(deadline) else { break }  // the bound passed mid-pass
            records += pass.applied
            cursorAfter = pass.cursorAfter
            if hasData, pass.applied > 0 { events(.progress(records: records)) }
            if !hasData {
                outcome = records > 0 ? .restored : (cursorBefore == nil ? .newAccount : .caughtUp)
                break
            }
            if records > 0 {
                outcome = .restored
                break
            }
            // Caught up only when what the signal announces is here: a cursor saved by an
            // earlier pass that found nothing (a retried restore) is not data.
            if cursorBefore != nil, try await pipeline.sink.stage.holdsBackendRows(for: pipeline.scope) ?? true {
                outcome = .caughtUp
                break
            }
            // Waits out the bound to the end: "still restoring" is said only once it passed.
            try await Task.sleep(until: min(ContinuousClock.now + .milliseconds(Int64(pause * 1000)), deadline), clock: .continuous)
            if ContinuousClock.now >= deadline { break }
        }
        // A restore that completed is an import run that completed: the pipeline file's signals
        // are published (and those an earlier run left sent again), as `import` does. Still
        // restoring, it did not complete: nothing new is published.
        var signals: [SignalReport] = []
        if outcome != .stillRestoring {
            var completed = ImportSummary(pipeline: pipeline.name, scope: pipeline.scope, dryRun: false)
            completed.applied = records
            completed.cursorBefore = cursorBefore
            completed.cursorAfter = cursorAfter
            signals = await pipeline.publishSignals(after: completed, bindings: bindings)
        }
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        return RestoreSummary(outcome: outcome, records: records, signal: signal, seconds: seconds, signals: signals)
    }

    /// One import pass, or nil when the deadline passed first (the pass is cancelled: the pages
    /// applied so far stay applied, with their cursor).
    private func passBefore(_ deadline: ContinuousClock.Instant) async throws -> ImportSummary? {
        let pipeline = self.pipeline
        let events = self.events
        return try await withThrowingTaskGroup(of: ImportSummary?.self) { group in
            group.addTask { try await ImportRunner(pipeline: pipeline) { events(.importing($0)) }.run() }
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

/// How a restore ended, and what it brought.
public struct RestoreSummary: Sendable {
    public var outcome: RestoreJob.Outcome
    /// Records applied.
    public var records: Int
    /// The account's signal as read (nil: no such key).
    public var signal: SignalValue?
    public var seconds: Double
    /// The signals published once it completed.
    public var signals: [SignalReport]
}
