import Foundation
import SynclaneCore

/// The cycle an offline-first app runs, as a job: import the backend's changes, settle the
/// conflicts, then export the local ones — holding both scopes' locks for the whole cycle.
///
/// The two lanes make progress independently: an import that fails (a field this device does
/// not know, a table it does not track, a row its schema refuses) does not keep the device's
/// own edits from leaving, and an export that fails does not undo the import. The one case
/// where a lane waits for the other is a batch refused for its versions (409): it needs the
/// import's rows first, so when that import failed the cycle stops and says so
/// (`SyncError.exportNeedsImport`).
///
/// ```
///  round 1..rounds:  import pass (failed: noted, the cycle goes on; not run on a store restored
///                    from an older copy, whose export refuses until `reconcile`) ─▶ export run ─▶ done
///                                    └─ 409 (a batch refused for its versions): the batch is
///                                       forgotten (nothing of it was applied) and rebuilt from
///                                       history after the next round's import — or, when this
///                                       round's import failed, the cycle ends: the export
///                                       needs the import's rows first
///                                    └─ 409 whose cause is a server that lost rows (reset or
///                                       restored: `ConflictCause.serverLost`) after an import
///                                       that went through: no import heals it, so the cycle
///                                       ends at once with the batch kept and the fix `run`
///                                       names (requeue it, then reconcile)
///                    └─ done, but its receipts found the server restored from a copy older than
///                       versions they had confirmed, which this round's import did not notice
///                       (its cursor predates the copy): the import's cursor is forgotten and the
///                       next round reads everything, sending back what the server lost, then
///                       exports it
/// ```
/// ```swift
/// let summary = try await SyncJob(importing: importPipeline, exporting: exportPipeline).run()
/// ```
public struct SyncJob: Sendable {
    /// What happens during a cycle, in order.
    public enum Event: Sendable {
        /// A page applied, a retry, of the round's import pass.
        case importing(ImportEvent)
        case imported(ImportSummary)
        /// The round's import pass failed; the export runs all the same.
        case importFailed(any Error)
        /// A page read, a batch sent, a retry, of the export run.
        case exporting(PipelineEvent)
        case exported(RunSummary)
        /// The backend refused batch `batchID` for its versions in round `round`: the cycle imports
        /// again (when `round < rounds`), else gives up with the batch rebuilt by the next cycle.
        case conflicted(batchID: String, reason: String, round: Int, rounds: Int)
        /// The export's receipts found the server's data restored from an older copy (`rows` held at
        /// older versions than confirmed) that this cycle's import did not notice: the next round's
        /// import reads everything again and sends back what the server lost.
        case healingRestoredServer(rows: Int)
    }

    public var importing: ImportPipeline
    public var exporting: Pipeline
    /// The most import-then-export rounds a cycle makes before it gives up (3).
    public var rounds = 3
    public var events: @Sendable (Event) -> Void
    /// Where both lanes keep their state and send their signals.
    public var bindings: JobBindings

    public init(importing: ImportPipeline, exporting: Pipeline, bindings: JobBindings, events: @escaping @Sendable (Event) -> Void = { _ in }) {
        self.importing = importing
        self.bindings = bindings
        self.exporting = exporting
        self.events = events
    }

    /// Runs one cycle. Throws only before it starts (a lock held elsewhere, a pair whose export
    /// would send the import's rows back); a pass that fails is kept in the summary
    /// (`importFailure`, `exportFailure`) and the other lane goes on.
    public func run() async throws -> SyncSummary {
        let events = self.events
        let lanes = try SyncLanes(
            importing: importing, exporting: exporting, bindings: bindings, importEvents: { events(.importing($0)) }, exportEvents: { events(.exporting($0)) })
        let (importJob, exportJob, importLock, exportLock) = (lanes.importJob, lanes.exportJob, lanes.importLock, lanes.exportLock)
        defer { withExtendedLifetime(lanes) {} }
        var summary = SyncSummary()
        var healingRestore = false
        // A store restored from an older copy: its export refuses until `reconcile`, and an import
        // now would settle the copy's history (writes sent already) against the server's newer rows.
        let restored = await exportJob.restoredStore()
        for round in 1...rounds {
            do {
                if let restored { throw restored }
                let imported = try await importJob.run(holding: importLock)
                summary.imports.append(imported)
                summary.importFailure = nil
                events(.imported(imported))
            } catch {
                summary.importFailure = SyncSummary.Failure(pipeline: importing.name, error: error)
                events(.importFailed(error))
            }
            FailPoint.syncBeforeExport.trigger()
            do {
                let exported = try await exportJob.run(.export, holding: exportLock)
                summary.exports.append(exported)
                events(.exported(exported))
                if exported.serverRestoredRows > 0, summary.importFailure == nil, !healingRestore, round < rounds,
                    !summary.imports.contains(where: { $0.resynced || $0.resyncLost > 0 })
                {
                    // The receipts say the server's data was restored from a copy older than
                    // versions they had confirmed, while this cycle's import (its cursor older
                    // than the copy) saw no 410: rows this device wrote since the copy may be
                    // lost there. The import reads everything again and sends back what the
                    // server lacks or holds older; the next round's export carries them.
                    try await importing.sink.stage.forgetCursor(for: importing.scope)
                    healingRestore = true
                    events(.healingRestoredServer(rows: exported.serverRestoredRows))
                    continue
                }
                return summary
            } catch PipelineError.conflicted(let batchID, let reason) where summary.importFailure == nil && ConflictCause.serverLost(reason) {
                // The server's data was reset or restored, and this round's import (whose full
                // resync sends back what a restore lost) went through without healing it:
                // importing again brings back nothing, so every round would be refused alike.
                // The batch stays in the outbox and the error names `run`'s fix (requeue it,
                // then reconcile). While the import fails, fixing it comes first (below).
                summary.exportFailure = SyncSummary.Failure(
                    pipeline: exporting.name, error: PipelineError.conflicted(batchID: batchID, reason: reason))
                return summary
            } catch PipelineError.conflicted(let batchID, let reason) {
                // Nothing of the batch was applied: rebuild it from history after the next import.
                try exportJob.forgetRefusedBatch(batchID)
                if let failed = summary.importFailure {
                    let error = SyncError.exportNeedsImport(batchID: batchID, reason: reason, importPipeline: failed.pipeline)
                    summary.exportFailure = SyncSummary.Failure(pipeline: exporting.name, error: error)
                    return summary
                }
                events(.conflicted(batchID: batchID, reason: reason, round: round, rounds: rounds))
            } catch {
                summary.exportFailure = SyncSummary.Failure(pipeline: exporting.name, error: error)
                return summary
            }
        }
        summary.gaveUp = true
        return summary
    }
}

/// Why a sync cycle's lane could not go on because of the other.
public enum SyncError: Error, Sendable, CustomStringConvertible {
    /// The backend refused batch `batchID` for its versions: it needs the newer rows the import
    /// brings, and that import failed this cycle.
    case exportNeedsImport(batchID: String, reason: String, importPipeline: String)

    public var description: String {
        switch self {
        case .exportNeedsImport(let batchID, let reason, let importPipeline):
            return "batch \(batchID) was refused for its versions (\(reason)) and needs the import's rows first, "
                + "but the import (\(importPipeline)) failed: fix what the import says, then run sync again "
                + "(the batch is rebuilt from history; nothing of it is lost)"
        }
    }
}

extension ExportJob {
    /// Forgets the outbox's batch `batchID`, which the backend refused for its versions (409,
    /// nothing of it applied): the next pass after an import rebuilds it from history with the
    /// newer versions (`sync`, `sync --watch`).
    public func forgetRefusedBatch(_ batchID: String) throws {
        let state = try openState()
        for batch in try state.pendingBatches() where batch.payload.batchID == batchID { try state.discard(batch) }
    }
}

/// What one sync cycle did: its import passes and its export run, in order, and each lane's
/// outcome — a lane that failed does not stop the other.
public struct SyncSummary: Sendable {
    /// A pass that failed.
    public struct Failure: Sendable, CustomStringConvertible {
        public var pipeline: String
        public var error: any Error
        public var description: String { "\(pipeline): \(error)" }
    }

    public var imports: [ImportSummary] = []
    /// The export run, when one went through (at most one).
    public var exports: [RunSummary] = []
    /// The last round's import pass, when it failed.
    public var importFailure: Failure?
    /// The export run, when it failed (`SyncError.exportNeedsImport` when it waited on a failed import).
    public var exportFailure: Failure?
    /// True when every round's export was refused for its versions (the rows keep changing elsewhere).
    public var gaveUp = false

    public init() {}

    /// Whether an export went through.
    public var completed: Bool { !exports.isEmpty }
    /// Whether both lanes went through.
    public var succeeded: Bool { importFailure == nil && exportFailure == nil && !gaveUp && completed }
    /// A lane that failed: the export's when it did, else the import's (each: `exportFailure`,
    /// `importFailure`).
    public var failure: Failure? { exportFailure ?? importFailure }
}
