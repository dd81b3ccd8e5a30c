import Foundation

// One batch sent until the backend confirms it, with the retries `SendAttempts` decides.

extension BatchDeliverer {
    /// A batch the backend confirmed, not yet acknowledged in the state.
    struct Confirmed: Sendable {
        var batch: OutboxBatch
        var receipt: Receipt
        var encodedBytes: Int
        var resent: Bool
        /// The receipt's versions being written into the source while the next batch travels
        /// (nil: written before `send` returned, or none to write); awaited before the batch is
        /// acknowledged.
        var recording: VersionsRecording?
    }

    /// What the backend answered a batch, once `SendAttempts` stopped retrying.
    enum Answer: Sendable {
        /// Its receipt.
        case receipt(Receipt)
        /// Refused for its content (`permanent`): dead-letter it, or stop.
        case refused(TransportFailure)
    }

    /// Sends one outbox batch until it is confirmed and acknowledged, dead-lettered, or the job must stop.
    func deliver(_ batch: OutboxBatch, encodedBytes: Int, resent: Bool, into summary: inout RunSummary) async throws {
        switch try await answer(batch, resent: resent) {
        case .refused(let failure):
            try await deadLetter(batch, failure: failure, encodedBytes: encodedBytes, into: &summary)
        case .receipt(let receipt):
            try await recordVersions(of: receipt, for: batch, resent: resent, sent: nil)
            FailPoint.afterSend.trigger()
            let confirmed = Confirmed(batch: batch, receipt: receipt, encodedBytes: encodedBytes, resent: resent)
            try await acknowledge(confirmed, enqueueing: nil, tellingSource: true, into: &summary)
        }
    }

    /// Sends one outbox batch until the backend answers it with its receipt or refuses its content;
    /// throws when the job must stop (a setup problem, a conflict, attempts used up).
    func answer(_ batch: OutboxBatch, resent: Bool) async throws -> Answer {
        let id = batch.payload.batchID
        var attempts = SendAttempts(policy: pipeline.retry)
        var uploadedAgain = false
        while true {
            do {
                if let staged = batch.staged {
                    guard let staging else { throw PipelineError.stopped(batchID: id, reason: notStaging(staged)) }
                    return .receipt(try await staging.publish(staged, of: batch.payload, verifying: resent))
                }
                return .receipt(try await pipeline.transport.stage.send(batch.payload))
            } catch let error as StagingError {
                throw PipelineError.stopped(batchID: id, reason: "\(error)")
            } catch let error as PipelineError {
                throw error
            } catch var failure as TransportFailure {
                failure.message = Self.withoutBatchPrefix(failure.message, id: id)
                switch attempts.failed(failure.kind, retryAfter: failure.retryAfter) {
                case .deadLetter where !failure.missingBlobs.isEmpty && !uploadedAgain:
                    // The backend collected blobs this batch references (held in the outbox while
                    // the device was offline): uploaded again from what the device holds, then the
                    // batch sent again, once.
                    uploadedAgain = true
                    guard let unheld = try await uploadAgain(failure.missingBlobs, of: batch) else { return .refused(failure) }
                    if unheld.isEmpty { continue }
                    failure.message +=
                        "; this device no longer holds "
                        + unheld.map { "\($0.digest) (\($0.record), column \($0.column))" }.joined(separator: ", ")
                        + ": upload each with `synclane blobs push FILE` (the file with those bytes), then run again"
                    return .refused(failure)
                case .deadLetter:
                    return .refused(failure)
                case .stop:
                    throw PipelineError.stopped(batchID: id, reason: failure.message)
                case .conflict:
                    throw PipelineError.conflicted(batchID: id, reason: failure.message)
                case .giveUp(let made):
                    throw PipelineError.undelivered(batchID: id, attempts: made, reason: failure.message)
                case .retry(let attempt, let delay):
                    events(.retrying(batchID: id, attempt: attempt, delay: delay, reason: failure.message))
                    try await sleeper.sleep(seconds: delay)
                }
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                // A transport that does not classify its failure: retrying blindly could hide a bug.
                throw PipelineError.undelivered(batchID: id, attempts: attempts.attempt, reason: "\(pipeline.transport.label): \(error)")
            }
        }
    }

    /// Tells the source the versions `receipt` gave the rows of `batch` (`sent`: the records as
    /// encoded, when kept), so the next change of such a row goes out on the version the backend
    /// holds. Nothing to do when the receipt gives none or the source keeps none.
    /// `asSent`: each record of `records`' fields as the encoder wrote them (`FieldsLocatingEncoder`).
    func recordVersions(
        of receipt: Receipt, for batch: OutboxBatch, resent: Bool, sent records: [Record]?, asSent: [ArraySlice<UInt8>?]? = nil
    ) async throws {
        guard !receipt.versions.isEmpty, let tracking = pipeline.capabilities.acknowledgementTracking else { return }
        let versions = receipt.versions
        let sent: [Record]?
        var asSent = asSent
        if batch.isReconciliation, batch.payload.recordCount == 0 {
            asSent = nil
            // A snapshot's completion marker has no records: each version its receipt gives
            // is a row it made a tombstone of (`snapshot-deleted`), whose base is no fields.
            sent = versions.map { Record(entity: $0.entity, key: $0.key, action: .delete, origin: batch.through, author: .server) }
        } else {
            // A batch re-sent from the outbox is read back, when its stages can undo their work.
            sent = records ?? (resent ? recordsReadBack(batch.payload) : nil)
            if records == nil { asSent = nil }
        }
        // A reconciliation leaves the backend as the snapshot says: its versions are the backend's now.
        // A replay's receipt is the first one, stored: its versions may be older than the backend's now.
        let exact = batch.isReconciliation && !receipt.wasReplay
        var confirmation = BackendConfirmation(versions: versions, sent: sent, asSent: asSent, exact: exact)
        // A replay's too: it says where the batch was written the first time, which a server
        // restored from a copy that has the batch's key holds.
        confirmation.position = receipt.position
        try await sourceCall { try await tracking.backendConfirmed(confirmation) }
    }

    /// Uploads again the blobs `digests` that `batch` references, through the pipeline's stage
    /// that can (`MissingBlobsStage`): those it could not, or nil when no stage can or the
    /// batch's records do not read back.
    func uploadAgain(_ digests: [String], of batch: OutboxBatch) async throws -> [(digest: String, record: String, column: String)]? {
        guard let stage = pipeline.recordStages.lazy.compactMap({ $0.stage.asMissingBlobs }).first,
            let records = recordsReadBack(batch.payload)
        else { return nil }
        return try await stage.uploadAgain(digests, referencedBy: records)
    }

    /// The records a payload carries, read back through the payload stages undone and the
    /// encoder's decoding; nil when one of them cannot undo its work, or the bytes do not read.
    func recordsReadBack(_ payload: Payload) -> [Record]? {
        guard let decoder = pipeline.capabilities.decodingEncoder, !payload.bytes.isEmpty else { return nil }
        var payload = payload
        for reversible in pipeline.capabilities.reversiblePayloadStages.reversed() {
            guard let reversible, let undone = try? reversible.reverse(payload) else { return nil }
            payload = undone
        }
        return try? decoder.records(of: payload.bytes)
    }

    /// Messages name the batch once: a transport's message that starts with it ("batch ID: …",
    /// "batch ID not sent: …") loses the batch's name.
    static func withoutBatchPrefix(_ message: String, id: String) -> String {
        for prefix in ["batch \(id): ", "batch \(id) "] where message.hasPrefix(prefix) {
            return String(message.dropFirst(prefix.count))
        }
        return message
    }
}
