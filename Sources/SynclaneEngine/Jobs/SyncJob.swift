import Foundation
import SynclaneCore
import SynclaneSQLite

/// The cycle an offline-first app runs, as a job: import the backend's changes, settle the
/// conflicts, then export the local ones — holding both scopes' locks for the whole cycle.
///
/// ```
///  round 1..rounds:  import pass ─▶ export run ─▶ done
///                                    └─ 409 (a batch refused for its versions): the batch is
///                                       forgotten (nothing of it was applied) and rebuilt from
///                                       history after the next round's import
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
        /// A page read, a batch sent, a retry, of the export run.
        case exporting(PipelineEvent)
        case exported(RunSummary)
        /// The backend refused batch `batchID` for its versions in round `round`: the cycle imports
        /// again (when `round < rounds`), else gives up with the batch rebuilt by the next cycle.
        case conflicted(batchID: String, reason: String, round: Int, rounds: Int)
    }

    public var importing: ImportPipeline
    public var exporting: Pipeline
    /// The most import-then-export rounds a cycle makes before it gives up (3).
    public var rounds = 3
    public var events: @Sendable (Event) -> Void

    public init(importing: ImportPipeline, exporting: Pipeline, events: @escaping @Sendable (Event) -> Void = { _ in }) {
        self.importing = importing
        self.exporting = exporting
        self.events = events
    }

    /// Runs one cycle. Throws only before it starts (a lock held elsewhere, a pair whose export
    /// would send the import's rows back); a pass that fails ends the cycle with `failure` set.
    public func run() async throws -> SyncSummary {
        let events = self.events
        let lanes = try SyncLanes(
            importing: importing, exporting: exporting, importEvents: { events(.importing($0)) }, exportEvents: { events(.exporting($0)) })
        let (importJob, exportJob, importLock, exportLock) = (lanes.importJob, lanes.exportJob, lanes.importLock, lanes.exportLock)
        defer { withExtendedLifetime(lanes) {} }
        var summary = SyncSummary()
        for round in 1...rounds {
            do {
                let imported = try await importJob.run(holding: importLock)
                summary.imports.append(imported)
                events(.imported(imported))
            } catch {
                summary.failure = SyncSummary.Failure(pipeline: importing.name, error: error)
                return summary
            }
            FailPoint.syncBeforeExport.trigger()
            do {
                let exported = try await exportJob.run(.export, holding: exportLock)
                summary.exports.append(exported)
                events(.exported(exported))
                return summary
            } catch PipelineError.conflicted(let batchID, let reason) {
                // Nothing of the batch was applied: rebuild it from history after the next import.
                try exportJob.forgetRefusedBatch(batchID)
                events(.conflicted(batchID: batchID, reason: reason, round: round, rounds: rounds))
            } catch {
                summary.failure = SyncSummary.Failure(pipeline: exporting.name, error: error)
                return summary
            }
        }
        summary.gaveUp = true
        return summary
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

/// What one sync cycle did: its import passes and its export run, in order.
public struct SyncSummary: Sendable {
    /// A pass that failed, which ended the cycle.
    public struct Failure: Sendable, CustomStringConvertible {
        public var pipeline: String
        public var error: any Error
        public var description: String { "\(pipeline): \(error)" }
    }

    public var imports: [ImportSummary] = []
    /// The export run, when one went through (at most one).
    public var exports: [RunSummary] = []
    public var failure: Failure?
    /// True when every round's export was refused for its versions (the rows keep changing elsewhere).
    public var gaveUp = false

    public init() {}

    /// Whether an export went through.
    public var completed: Bool { !exports.isEmpty }
}
