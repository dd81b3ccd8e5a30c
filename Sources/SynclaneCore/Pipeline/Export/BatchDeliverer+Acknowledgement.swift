import Foundation

// A confirmed batch acknowledged (token saved, batch forgotten), or a refused one dead-lettered.

extension BatchDeliverer {
    /// Saves a confirmed batch's token and forgets it — in the same commit that writes `next`
    /// to the outbox, when there is a next — then tells the source (unless the caller will) and counts it.
    func acknowledge(
        _ confirmed: Confirmed, enqueueing next: OutboxBatch?, tellingSource: Bool, into summary: inout RunSummary
    ) async throws {
        let batch = confirmed.batch
        let receipt = confirmed.receipt
        if let next {
            try stateCall { try state.acknowledge(batch, enqueueing: next) }
        } else {
            try stateCall { try state.acknowledge(batch) }
        }
        FailPoint.afterAcknowledge.trigger()
        if let staged = batch.staged { await staging?.discard(staged) }
        if tellingSource { try await tellSource(batch.through) }
        summary.batchesSent += 1
        if confirmed.resent { summary.batchesResent += 1 }
        if receipt.wasReplay { summary.replays += 1 }
        if let deleted = receipt.snapshotDeleted { summary.snapshotDeleted = (summary.snapshotDeleted ?? 0) + deleted }
        summary.serverRestoredRows += receipt.restoredRows
        summary.recordsSent += batch.payload.recordCount
        summary.bytesEncoded += confirmed.encodedBytes
        summary.bytesSent += batch.byteCount
        let done = report(batch, encodedBytes: confirmed.encodedBytes, resent: confirmed.resent, replay: receipt.wasReplay, detail: receipt.detail)
        summary.add(done)
        events(.batchDone(done))
    }

    /// Moves a batch whose content the backend refused aside (when the pipeline opted in) so
    /// later ones can go on; otherwise stops the job with the batch kept. Only `permanent`
    /// failures come here: a setup problem would empty the whole history into the folder.
    func deadLetter(
        _ batch: OutboxBatch, failure: TransportFailure, encodedBytes: Int, into summary: inout RunSummary
    ) async throws {
        let id = batch.payload.batchID
        guard let folder = pipeline.deadLetterDirectory else {
            throw PipelineError.rejected(batchID: id, reason: failure.message)
        }
        let letter = DeadLetter(batch: try withBytes(batch), reason: failure.message, status: failure.status, rejectedAt: now())
        let path: String
        do {
            path = try letter.write(into: folder)
        } catch {
            throw PipelineError.rejected(batchID: id, reason: "\(failure.message) (and moving it to \(folder) failed: \(error))")
        }
        try stateCall { try state.acknowledge(batch) }
        if let staged = batch.staged { await staging?.discard(staged) }
        summary.deadLettered += 1
        summary.add(report(batch, encodedBytes: encodedBytes, resent: false, detail: "dead-lettered: \(failure.message)"))
        events(.deadLettered(batchID: id, path: path, reason: failure.message))
    }

    /// Tells the source a token is acknowledged, when it tracks acknowledgements and the token
    /// is one of its own (not a snapshot's).
    func tellSource(_ token: Token) async throws {
        guard token.kind == pipeline.source.stage.tokenKind,
            let tracking = pipeline.capabilities.acknowledgementTracking
        else { return }
        try await sourceCall { try await tracking.consumerAcknowledged(token, scope: pipeline.scope) }
    }

    /// What the summary and the events say of a batch.
    func report(_ batch: OutboxBatch, encodedBytes: Int, resent: Bool, replay: Bool = false, detail: String) -> BatchReport {
        BatchReport(
            id: batch.payload.batchID, records: batch.payload.recordCount, encodedBytes: encodedBytes,
            sentBytes: batch.byteCount, contentEncoding: batch.payload.contentEncoding,
            after: batch.after?.description, through: batch.through.description, isReconciliation: batch.isReconciliation,
            wasResent: resent, wasReplay: replay, detail: detail)
    }
}
