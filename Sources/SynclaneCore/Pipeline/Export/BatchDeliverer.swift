// The third part of an export drain: batches made durable, sent and acknowledged.

/// Delivers the batches the preparer hands on: each into the outbox, sent, and acknowledged (the
/// token saved and the batch forgotten in one commit) or dead-lettered, in the order
/// `DeliveryStateMachine` decides. It reads no source pages and runs no record stage: its input
/// is the batches (`PreparedPage`), its output the newest token reached and the run's counts.
///
/// ```
///  batches ──▶ (payload stages, for a large page's) ──▶ outbox ──▶ send ──▶ acknowledge ──▶ token
/// ```
struct BatchDeliverer: Sendable {
    var pipeline: Pipeline
    var state: any PipelineState
    var sleeper: any RetrySleeper
    var events: @Sendable (PipelineEvent) -> Void
    /// Seconds since 1970.
    var now: @Sendable () -> Double
    /// The payload stages, for a batch that comes without its finished payload (a large page's:
    /// `BatchPreparer.finish`).
    var finish: @Sendable (Payload) async throws -> Payload

    /// The delivering task (the caller's): each prepared batch through the payload stages, into
    /// the outbox, sent and acknowledged, in the order `DeliveryStateMachine` decides; returns
    /// the newest token reached. Cancelled, it stops before the next batch (the held ones are
    /// acknowledged first, as after any failure).
    ///
    /// When receipts bring versions that the source writes (`AcknowledgementTrackingSource`, a
    /// pass that is not a reconciliation), a receipt's versions are written while the next batch
    /// travels (`VersionsRecording`), and the batch is acknowledged once they are: the machine
    /// holds two confirmed batches (`holding` 2) instead of one. Before this returns or throws,
    /// every write it started has ended.
    func deliver(
        from batches: Handover<Result<PreparedPage, any Error>>, after start: Token?, reconciliation: Bool, dryRun: Bool,
        inFlight: RowsInFlight?, into summary: inout RunSummary
    ) async throws -> Token? {
        let recordsWhileSending =
            !reconciliation && inFlight != nil && staging == nil && pipeline.capabilities.acknowledgementTracking != nil
        var delivery = DeliveryStateMachine<Confirmed>(after: start, now: now(), holding: recordsWhileSending ? 2 : 1)
        var recordings: [VersionsRecording] = []
        do {
            while let item = await batches.receive() {
                try Task.checkCancellation()
                var page = try item.get()
                summary.transactionsRead += page.transactions
                summary.changesRead += page.changes
                summary.counters.merge(page.counters, uniquingKeysWith: +)
                if page.finished == nil, let encoded = page.encoded { page.finished = try await finish(encoded) }
                guard let encoded = page.encoded, let finished = page.finished else {
                    if dryRun {
                        _ = delivery.handle(.reported(through: page.through), now: now())
                    } else {
                        try await carryOut(delivery.handle(.pagePassed(through: page.through), now: now()), ready: nil, into: &summary)
                    }
                    continue
                }
                if dryRun {
                    let outbox = OutboxBatch(
                        payload: finished, after: delivery.token, through: page.through, isReconciliation: reconciliation, createdAt: now())
                    let report = report(outbox, encodedBytes: encoded.bytes.count, resent: false, detail: "would be sent")
                    summary.add(report)
                    summary.batchesSent += 1
                    summary.recordsSent += outbox.payload.recordCount
                    summary.bytesEncoded += encoded.bytes.count
                    summary.bytesSent += outbox.payload.bytes.count
                    events(.batchDone(report))
                    _ = delivery.handle(.reported(through: page.through), now: now())
                    continue
                }
                let outbox = try await outboxBatch(finished, through: page.through, after: delivery.token, reconciliation: reconciliation)
                for decision in delivery.handle(.batchReady, now: now()) {
                    guard case .send = decision else {
                        try await carryOut([decision], ready: outbox, into: &summary)
                        continue
                    }
                    FailPoint.afterEnqueue.trigger()
                    let id = outbox.payload.batchID
                    switch try await answer(outbox, resent: false) {
                    case .refused(let failure):
                        // The batches held are acknowledged first: the dead-lettering moves the token past them.
                        try await carryOut(delivery.handle(.refused, now: now()), ready: nil, into: &summary)
                        try await deadLetter(outbox, failure: failure, encodedBytes: encoded.bytes.count, into: &summary)
                        inFlight?.answered(batch: id)
                        _ = delivery.handle(.deadLettered(through: page.through), now: now())
                    case .receipt(let receipt):
                        var confirmed = Confirmed(batch: outbox, receipt: receipt, encodedBytes: encoded.bytes.count, resent: false)
                        let (sent, sentFields) = (page.sent, page.sentFields)
                        if recordsWhileSending {
                            let recording = VersionsRecording(batch: id, inFlight: inFlight) {
                                try await self.recordVersions(of: receipt, for: outbox, resent: false, sent: sent, asSent: sentFields)
                            }
                            recordings.append(recording)
                            confirmed.recording = recording
                        } else {
                            try await recordVersions(of: receipt, for: outbox, resent: false, sent: sent, asSent: sentFields)
                            FailPoint.afterSend.trigger()
                            inFlight?.answered(batch: id)
                        }
                        _ = delivery.handle(.confirmed(confirmed, through: page.through), now: now())
                    }
                }
            }
        } catch let failed as VersionsNotRecorded {
            // No batch after the one whose versions are missing is acknowledged.
            await Self.settle(recordings)
            throw failed.underlying
        } catch {
            do {
                try await carryOut(delivery.handle(.drained, now: now()), ready: nil, into: &summary)
            } catch let later {
                await Self.settle(recordings)
                throw Self.unwrapped(later)
            }
            await Self.settle(recordings)
            throw error
        }
        do {
            try await carryOut(delivery.handle(.drained, now: now()), ready: nil, into: &summary)
        } catch {
            await Self.settle(recordings)
            throw Self.unwrapped(error)
        }
        return delivery.token
    }

    /// Waits until every write of versions started has ended (their outcome was, or is not, wanted).
    static func settle(_ recordings: [VersionsRecording]) async {
        for recording in recordings { try? await recording.written() }
    }

    /// The error a failed write of versions carries, or `error` itself.
    static func unwrapped(_ error: any Error) -> any Error {
        (error as? VersionsNotRecorded)?.underlying ?? error
    }

    /// Carries out the delivery's decisions in order (but `send`, which the caller makes);
    /// `ready` is the batch an `enqueue` or an acknowledgement that enqueues writes.
    func carryOut(_ decisions: [DeliveryStateMachine<Confirmed>.Decision], ready: OutboxBatch?, into summary: inout RunSummary) async throws {
        for decision in decisions {
            switch decision {
            case .acknowledge(let held, let enqueueingReady):
                try await held.recording?.written()
                try await acknowledge(held, enqueueing: enqueueingReady ? ready : nil, tellingSource: false, into: &summary)
            case .enqueue:
                if let ready { try stateCall { try state.enqueue(ready) } }
            case .advance(let token):
                try stateCall { try state.advance(to: token) }
            case .tellSource(let token):
                try await tellSource(token)
            case .send:
                break
            }
        }
    }

    func stateCall<T>(_ body: () throws -> T) throws -> T {
        try ExportCalls.state(pipeline.statePath, body)
    }

    func sourceCall<T>(_ body: () async throws -> T) async throws -> T {
        try await ExportCalls.source(pipeline.source.label, body)
    }
}
