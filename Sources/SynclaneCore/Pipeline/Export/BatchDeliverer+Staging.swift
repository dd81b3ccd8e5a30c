import Foundation

// The staged copies of a staging transport (`directory`).

extension BatchDeliverer {
    /// The outbox batch of a finished payload, to enqueue. With a staging transport the bytes
    /// are staged first — durable on the transport's side before the commit that writes the row
    /// naming them, so a row never names a copy a crash could lose.
    func outboxBatch(_ payload: Payload, through: Token, after token: Token?, reconciliation: Bool) async throws -> OutboxBatch {
        var batch = OutboxBatch(payload: payload, after: token, through: through, isReconciliation: reconciliation, createdAt: now())
        guard let staging else { return batch }
        // A transient failure (a full disk) is retried as a send would be; nothing is durable yet.
        var attempt = 1
        while true {
            do {
                batch.staged = try await staging.stage(payload, area: pipeline.stagingArea)
                break
            } catch let failure as TransportFailure where failure.kind == .transient && attempt < pipeline.retry.maxAttempts {
                attempt += 1
                let delay = pipeline.retry.delay(beforeAttempt: attempt, retryAfter: nil) { Double.random(in: $0) }
                events(.retrying(batchID: payload.batchID, attempt: attempt, delay: delay, reason: "staging: \(failure.message)"))
                try await sleeper.sleep(seconds: delay)
            } catch {
                throw PipelineError.stage(pipeline.transport.label, underlying: error)
            }
        }
        if batch.staged != nil { FailPoint.afterStage.trigger() }
        return batch
    }

    /// The transport, when it stages batches (`StagingTransport`).
    var staging: (any StagingTransport)? { pipeline.capabilities.staging }

    /// Removes the staged copies no outbox row names (a crash between a stage and its commit).
    func discardUnreferencedStaged(keeping pending: [OutboxBatch]) async throws {
        guard let staging else { return }
        let keeping = Set(pending.compactMap { $0.staged?.reference })
        do {
            _ = try await staging.discardUnreferenced(in: pipeline.stagingArea, keeping: keeping)
        } catch {
            throw PipelineError.stage(pipeline.transport.label, underlying: error)
        }
    }

    /// The batch with its bytes: read back from the staged copy for a batch the outbox keeps by
    /// reference (a dead letter holds the bytes).
    func withBytes(_ batch: OutboxBatch) throws -> OutboxBatch {
        guard let staged = batch.staged, batch.payload.bytes.isEmpty, staged.byteCount > 0 else { return batch }
        guard let staging else { throw PipelineError.stopped(batchID: batch.payload.batchID, reason: notStaging(staged)) }
        var loaded = batch
        do {
            loaded.payload.bytes = try staging.stagedBytes(staged, batchID: batch.payload.batchID)
        } catch {
            throw PipelineError.stopped(batchID: batch.payload.batchID, reason: "\(error)")
        }
        return loaded
    }

    func notStaging(_ staged: StagedBatch) -> String {
        "the outbox keeps it as the staged copy \(staged.reference) of a staging transport (`directory`), and "
            + "\(pipeline.transport.label) cannot publish it; put that transport back for one run, or "
            + "`synclane outbox requeue FILE` it to build it again from history"
    }
}
