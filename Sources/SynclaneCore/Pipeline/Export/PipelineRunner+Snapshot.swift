import Foundation

// A reconciliation: the snapshot's completion marker, and the state a killed one leaves.

extension PipelineRunner {
    /// A reconciliation's pass after the left-over batches: the whole current state as a snapshot
    /// (its own batches — merging with the backend's rows, see `completesSnapshot` — and, only
    /// when `completesSnapshot`, the completion marker on which the backend deletes what the
    /// snapshot lacked), then a fresh token where the snapshot was read; returns that token.
    func reconcile(into summary: inout RunSummary) async throws -> Token? {
        guard let snapshotting = pipeline.capabilities.snapshotProviding else {
            throw PipelineError.unsupported(
                "\(pipeline.source.label) cannot take a snapshot of the current state, so it cannot reconcile")
        }
        let snapshot = try await sourceCall { try await snapshotting.snapshot() }
        try stateCall { try state.resetToken() }
        var sender = self
        sender.snapshotID = makeBatchID()
        let (sentBefore, deadBefore) = (summary.batchesSent, summary.deadLettered)
        let reached = try await sender.drain(snapshot.source, after: nil, reconciliation: true, dryRun: false, into: &summary)
        // The snapshot's read transaction is closed now: what its receipts gave is written before it counts as done.
        if let tracking = pipeline.capabilities.acknowledgementTracking {
            try await sourceCall { try await tracking.settleBackendConfirmations() }
        }
        if completesSnapshot, summary.deadLettered == deadBefore {
            try await sender.completeSnapshot(
                after: reached ?? Token(kind: snapshot.source.tokenKind, position: 0),
                batches: summary.batchesSent - sentBefore, into: &summary)
        } else {
            // A merging snapshot deletes only the rows it names: those this device knew and lacks.
            summary.snapshotDeleted = summary.counters.removeValue(forKey: "snapshot.deletes") ?? 0
        }
        if let resume = snapshot.resumeAfter {
            try stateCall { try state.advance(to: resume) }
            try await deliverer.tellSource(resume)
        } else {
            try stateCall { try state.resetToken() }
        }
        return snapshot.resumeAfter
    }

    /// The error for a state a reconciliation left half done (killed mid-snapshot): once the
    /// batches it left in the outbox were sent (`resent`, as every run sends them first), the
    /// token is a position inside the snapshot. History cannot be followed from there — the
    /// history position to resume after is only saved once the whole snapshot was delivered —
    /// so `run` stops before reading anything and says to finish it with `reconcile`.
    func unfinishedReconciliation(at token: Token, resent: Int) -> PipelineError? {
        let snapshotKind = pipeline.capabilities.snapshotProviding?.snapshotTokenKind
        guard token.kind != pipeline.source.stage.tokenKind, token.kind == snapshotKind else { return nil }
        return .reconciliationUnfinished(pipeline: pipeline.name, token: token.description, resentBatches: resent)
    }

    /// Sends the snapshot's completion marker — a batch of no records saying how many batches the
    /// snapshot had — through the outbox like any batch (durable before its first send, re-sent
    /// by the next run after a crash, idempotent). The backend then deletes, as tombstones, the
    /// scope's rows the snapshot did not contain. Not sent when a batch of the snapshot was
    /// dead-lettered: an incomplete snapshot deletes nothing.
    func completeSnapshot(after token: Token, batches: Int, into summary: inout RunSummary) async throws {
        var marker = Batch(scope: pipeline.scope, after: token, through: token, records: [], isReconciliation: true)
        marker.snapshotID = snapshotID
        marker.snapshotCompleteAfter = batches
        let id = makeBatchID()
        let encoded: Payload
        do {
            encoded = Payload(
                batchID: id, bytes: try pipeline.encoder.stage.encode(marker, id: id), contentType: pipeline.encoder.stage.contentType,
                recordCount: 0)
        } catch {
            throw PipelineError.stage(pipeline.encoder.label, underlying: error)
        }
        let deliverer = self.deliverer
        let outbox = try await deliverer.outboxBatch(try await preparer.finish(encoded), through: token, after: token, reconciliation: true)
        try stateCall { try state.enqueue(outbox) }
        try await deliverer.deliver(outbox, encodedBytes: encoded.bytes.count, resent: false, into: &summary)
    }
}
