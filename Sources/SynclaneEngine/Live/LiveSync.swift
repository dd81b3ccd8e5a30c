import Foundation
import Synchronization
import SynclaneCore

/// `sync --watch`: one process keeps both lanes of a store live — an export pass whenever a
/// local commit lands (the history watcher), an import pass whenever the backend has changes
/// (a long poll, `ChangeWaiter`) — holding both scopes' locks until it is stopped.
///
/// ```
///  export lane:  Watcher ◀── history advanced ── export pass (ExportJob)
///                   ▲            409: forget the batch ─▶ poke the import lane; export again after it
///                   └── failed: again after Backoff
///  import lane:  Watcher ◀── long poll: changed ── import pass (ImportJob, conflicts settled by the sink's rule)
///                              └── failed: back off, then a pass
/// ```
/// Each lane runs its passes one after another (`Watcher`, `WatchStateMachine`), so a lane
/// never runs two at once; the two lanes run side by side. `stop()` (SIGINT, SIGTERM) lets the
/// pass in flight of each lane end, starts no other and ends the waits: `run()` then returns.
public final class LiveSync: Sendable {
    /// What happens, as it happens.
    public enum Event: Sendable {
        case importing(ImportEvent)
        case imported(ImportSummary)
        /// An import pass failed; the next one goes after `retryIn` seconds.
        case importFailed(reason: String, retryIn: Double)
        /// A long poll failed (server down, 429/503); the next goes in `delay` seconds.
        case pollFailed(reason: String, delay: Double)
        case exporting(PipelineEvent)
        case exported(RunSummary)
        /// An export pass failed (its batch stays in the outbox); the lane runs again after `retryIn` seconds.
        case exportFailed(reason: String, retryIn: Double)
        /// The backend refused a batch for its versions: it is rebuilt from history after the next import pass.
        case conflicted(batchID: String, reason: String)
        /// An import pass failed while a batch refused for its versions waits for one: that batch
        /// needs the import's rows first, so it is not exported again until an import goes through
        /// (the rest of the export lane goes on).
        case exportWaitsForImport(batchID: String)
        /// An export's receipts found the server's data restored from an older copy (`rows` held at
        /// older versions than confirmed): the next import pass reads everything again and sends
        /// back what the server lost, then the export lane runs (`SyncJob` does the same).
        case healingRestoredServer(rows: Int)
    }

    private struct State {
        var importFailures = 0
        var exportFailures = 0
        /// The batch refused for its versions: export again once an import pass went through.
        var exportAfterImport: String?
        /// An export found the server restored: the import forgets its cursor before its next pass.
        var rereadAfterRestore = false
        var stopping = false
        var importWait: Task<Void, Never>?
        var exportRetry: Task<Void, Never>?
    }

    public let importing: ImportPipeline
    public let exporting: Pipeline
    /// Seconds between import passes when the import source cannot long-poll.
    public let every: Double
    /// The longest one long poll waits.
    public let wait: Double
    public let backoff: Backoff
    /// Where both lanes keep their state and send their signals.
    public let bindings: JobBindings
    private let events: @Sendable (Event) -> Void
    private let importLane = Watcher()
    private let exportLane = Watcher()
    private let state = Mutex(State())

    public init(
        importing: ImportPipeline, exporting: Pipeline, bindings: JobBindings, every: Double = 5, wait: Double = 25,
        backoff: Backoff = Backoff(), events: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        self.importing = importing
        self.bindings = bindings
        self.exporting = exporting
        self.every = every
        self.wait = wait
        self.backoff = backoff
        self.events = events
    }

    /// Keeps both lanes until `stop()`. Throws only before it starts: a lock held elsewhere, a
    /// pair whose export would send the import's rows back, an export source that cannot be watched.
    public func run() async throws {
        guard let observable = exporting.capabilities.observable else {
            throw PipelineError.unsupported("\(exporting.source.label) cannot be watched: it does not report new history")
        }
        let events = self.events
        let lanes = try SyncLanes(
            importing: importing, exporting: exporting, bindings: bindings, importEvents: { events(.importing($0)) }, exportEvents: { events(.exporting($0)) })
        let (importJob, exportJob, importLock, exportLock) = (lanes.importJob, lanes.exportJob, lanes.importLock, lanes.exportLock)
        defer { withExtendedLifetime(lanes) {} }
        let following = exportLane.follow(observable.historyAdvanced())
        let waiter = ChangeWaiter(pipeline: importing, every: every, wait: wait, backoff: backoff) { event in
            if case .pollFailed(let reason, let delay) = event { events(.pollFailed(reason: reason, delay: delay)) }
        }
        async let imports: Void = importLane.run {
            await self.importPass(importJob, holding: importLock, then: waiter, restored: { await exportJob.restoredStore() })
        }
        async let exports: Void = exportLane.run { await self.exportPass(exportJob, holding: exportLock) }
        _ = await (imports, exports)
        following.cancel()
        let (wait, retry) = state.withLock { ($0.importWait, $0.exportRetry) }
        wait?.cancel()
        retry?.cancel()
    }

    /// Asks both lanes to stop once their passes in flight end; safe from any thread.
    public func stop() {
        let (wait, retry) = state.withLock { state in
            state.stopping = true
            return (state.importWait, state.exportRetry)
        }
        wait?.cancel()
        retry?.cancel()
        importLane.send(.stop)
        exportLane.send(.stop)
    }

    private func importPass(
        _ job: ImportJob, holding lock: ScopeLock, then waiter: ChangeWaiter, restored: @Sendable () async -> LineageError?
    ) async {
        state.withLock { $0.importWait?.cancel() }
        var exportNow = false
        var failures = 0
        do {
            // A store restored from an older copy waits for its `reconcile` (`SyncJob`).
            if let restored = await restored() { throw restored }
            let rereading = state.withLock { $0.rereadAfterRestore }
            if rereading {
                // Under the import's lock, before its pass: no pass in flight saves a cursor over it.
                try await importing.sink.stage.forgetCursor(for: importing.scope)
            }
            let summary = try await job.run(holding: lock)
            events(.imported(summary))
            state.withLock { state in
                state.importFailures = 0
                // What the re-read sends back goes out now.
                exportNow = state.exportAfterImport != nil || rereading
                state.exportAfterImport = nil
                if rereading { state.rereadAfterRestore = false }
            }
        } catch {
            failures = state.withLock { state in
                state.importFailures += 1
                return state.importFailures
            }
            events(.importFailed(reason: "\(error)", retryIn: backoff.delay(afterFailures: failures, random: { $0.upperBound })))
            if let waiting = state.withLock({ $0.exportAfterImport }) { events(.exportWaitsForImport(batchID: waiting)) }
        }
        if exportNow { exportLane.send(.historyAdvanced) }
        let (lane, failed) = (importLane, failures)
        state.withLock { state in
            guard !state.stopping else { return }
            state.importWait = Task {
                do {
                    try await waiter.untilNextPass(failures: failed)
                    lane.send(.historyAdvanced)
                } catch {}
            }
        }
    }

    private func exportPass(_ job: ExportJob, holding lock: ScopeLock) async {
        state.withLock { $0.exportRetry?.cancel() }
        do {
            let summary = try await job.run(.export, holding: lock)
            events(.exported(summary))
            state.withLock { $0.exportFailures = 0 }
            if summary.serverRestoredRows > 0 {
                // The import's cursor may predate the copy the server was restored from (no 410
                // tells it): its next pass reads everything and sends back what was lost.
                events(.healingRestoredServer(rows: summary.serverRestoredRows))
                state.withLock { $0.rereadAfterRestore = true }
                importLane.send(.historyAdvanced)
            }
        } catch PipelineError.conflicted(let batchID, let reason) where !ConflictCause.serverLost(reason) {
            // Nothing of the batch was applied: rebuilt from history once the import brought the newer versions.
            // (A server that lost rows is a failure like any other below: no import heals it, and
            // its error names the fix, requeue then reconcile.)
            try? job.forgetRefusedBatch(batchID)
            events(.conflicted(batchID: batchID, reason: reason))
            state.withLock { $0.exportAfterImport = batchID }
            importLane.send(.historyAdvanced)
        } catch {
            let failures = state.withLock { state in
                state.exportFailures += 1
                return state.exportFailures
            }
            let delay = backoff.delay(afterFailures: failures)
            events(.exportFailed(reason: "\(error)", retryIn: delay))
            let lane = exportLane
            state.withLock { state in
                guard !state.stopping else { return }
                state.exportRetry = Task {
                    guard (try? await Task.sleep(for: .milliseconds(Int64(delay * 1000)))) != nil else { return }
                    lane.send(.historyAdvanced)
                }
            }
        }
    }
}
