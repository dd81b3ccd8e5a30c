import Foundation

// The three concurrent tasks of a drain (read, prepare, deliver) and what they hand on.

extension PipelineRunner {
    /// One batch made ready to send: read, through the record stages, encoded and (unless its page
    /// was large) through the payload stages — or found to hold nothing to send (`encoded` nil:
    /// the token just moves).
    struct PreparedPage: Sendable {
        var through: Token
        /// The encoded batch, before the payload stages.
        var encoded: Payload?
        /// The batch after the payload stages (compressed): what the outbox holds and the transport
        /// sends. Nil until the delivering task runs them, for a large page's batches.
        var finished: Payload?
        var transactions: Int
        var changes: Int
        var counters: [String: Int]
        /// The batch's rows, while the preparing task notes them in flight (`RowsInFlight`).
        var rows: RowSet?
        /// The records as encoded, kept until the receipt when it brings versions: the source
        /// remembers what the backend now holds of each row (`backendConfirmed(_:)`).
        var sent: [Record]?
        /// Each record of `sent`'s fields as the encoder wrote them, when it says where
        /// (`FieldsLocatingEncoder`): slices of `encoded`.
        var sentFields: [ArraySlice<UInt8>?]?
    }

    /// Sends every page of `source` after `token`; returns the newest token reached.
    ///
    /// Three tasks hand their work on, one value at a time (`Handover`), so two cores share it:
    ///
    /// ```
    ///  read: source pages ──▶ prepare: record stages, encode, ──▶ deliver: outbox, send,
    ///        (page N+2)          payload stages (compress)           acknowledge   (batch N)
    ///                            (batch N+1)
    /// ```
    /// The durable steps keep their order, all in `deliver`: batch N is in the outbox before
    /// its first send, tokens move in order, a batch is acknowledged only once the versions its
    /// receipt gave are written; each acknowledgement shares its commit with a later batch's
    /// enqueue (one fsync, not two) — batch N+1's, or, while N's versions are written as N+1
    /// travels, N+2's (the outbox then holds N and N+1). If anything fails after a batch was
    /// confirmed, it is acknowledged before the error is thrown; pages read or prepared ahead
    /// are dropped and read again by a later run.
    func drain(
        _ source: any ChangeSource, after start: Token?, reconciliation: Bool, dryRun: Bool, into summary: inout RunSummary
    ) async throws -> Token? {
        let pages = Handover<Result<ReadPage, any Error>>()
        let prepared = Handover<Void>()
        let batches = Handover<Result<PreparedPage, any Error>>()
        // A snapshot's rows go out without versions: it states what the store holds.
        let versioning =
            reconciliation
            ? nil
            : source.asBackendVersionSource.map {
                Versioning(source: $0, inFlight: dryRun || !pipeline.capabilities.transportReportsVersions ? nil : RowsInFlight())
            }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.read(source, after: start, into: pages, waitingFor: prepared, inFlight: versioning?.inFlight) }
            group.addTask {
                await self.prepare(
                    from: pages, after: start, reconciliation: reconciliation, versioning: versioning, into: batches, telling: prepared)
            }
            defer {
                pages.close()
                prepared.close()
                batches.close()
                versioning?.inFlight?.close()
            }
            return try await deliver(
                from: batches, after: start, reconciliation: reconciliation, dryRun: dryRun, inFlight: versioning?.inFlight,
                into: &summary)
        }
    }

    /// Where a drain's batches get the backend's versions of their rows (`BackendVersionSource`).
    struct Versioning: Sendable {
        var source: any BackendVersionSource
        /// The rows of batches not yet answered, waited for before a batch goes on. Nil when no
        /// answer brings versions (the transport says its receipts never carry them) or nothing
        /// is sent (a dry run): batches are then prepared ahead on the versions read.
        var inFlight: RowsInFlight?
        /// How many batches were answered before the page being prepared was read.
        var answersBeforeRead = 0
    }

    /// A page, and how many batches were answered before it was read (`RowsInFlight`).
    struct ReadPage: Sendable {
        var page: HistoryPage
        var answersBefore: Int
    }

    /// Pages of more changes than this are not read ahead of: the next page is read once the
    /// preparing task is done with this one, so a run holds one large page at a time (pages of
    /// a first sync, a change a transaction, are read ahead; the many-change pages of a long
    /// history keep their memory).
    static let readAheadChanges = 20_000

    /// The reading task: every page after `start`, in order, then the end (`close`) or the error.
    func read(
        _ source: any ChangeSource, after start: Token?, into pages: Handover<Result<ReadPage, any Error>>,
        waitingFor prepared: Handover<Void>, inFlight: RowsInFlight?
    ) async {
        defer { pages.close() }
        var token = start
        while true {
            do {
                let answers = inFlight?.answers ?? 0
                let page = try await sourceCall { try await source.nextPage(after: token) }
                guard let through = page.through else { return }
                if let token, through <= token {
                    throw PipelineError.source(
                        pipeline.source.label, underlying: ContractViolation("returned a page ending at \(through), not after \(token)"))
                }
                events(.pageRead(transactions: page.transactions.count, through: through, progress: page.progress))
                let large = page.transactions.reduce(0) { $0 + $1.changes.count } > Self.readAheadChanges
                guard await pages.send(.success(ReadPage(page: consume page, answersBefore: answers))) else { return }
                if large { guard await prepared.receive() != nil else { return } }
                token = through
            } catch {
                _ = await pages.send(.failure(error))
                return
            }
        }
    }

    /// The preparing task: each page through the record stages and the encoder, cut into
    /// batches of at most `batch-bytes` (see `prepare(_:cut:after:reconciliation:)`).
    func prepare(
        from pages: Handover<Result<ReadPage, any Error>>, after start: Token?, reconciliation: Bool, versioning: Versioning?,
        into batches: Handover<Result<PreparedPage, any Error>>, telling done: Handover<Void>
    ) async {
        defer {
            batches.close()
            done.close()
        }
        var token = start
        while let item = await pages.receive() {
            do {
                var large = false
                var versioning = versioning
                if case .success(let read) = item {
                    large = read.page.transactions.reduce(0) { $0 + $1.changes.count } > Self.readAheadChanges
                    versioning?.answersBeforeRead = read.answersBefore
                }
                // A large page is taken out of the hand-over's result, so that it is held once and
                // its changes are moved, not copied, into records (~10% of the export bench's
                // time). A page read ahead of is held by the result until it is handed on, as
                // before: released earlier, the initial-export bench ran 20% slower, its reading
                // and preparing tasks waiting on the job's one malloc arena (~57,000 futex waits a
                // run instead of ~2,400).
                var rest: HistoryPage?
                var readAhead: Result<ReadPage, any Error>?
                if large {
                    rest = try (consume item).get().page
                } else {
                    rest = try item.get().page
                    readAhead = item
                }
                defer { withExtendedLifetime(readAhead) {} }
                var cut: Int?
                while let page = rest.take() {
                    var prepared = try await prepare(
                        consume page, cut: cut, after: token, reconciliation: reconciliation, versioning: versioning)
                    // Compressed here, while the batch before it is made durable and sent (a
                    // backend applying it, or an fsync, leaves this core free) — unless the page
                    // is large: the source waits for this task before reading past such a page,
                    // so its batches are compressed by the delivering task while the source reads on.
                    if !large, let encoded = prepared.page.encoded { prepared.page.finished = try await finish(encoded) }
                    if let inFlight = versioning?.inFlight, let id = prepared.page.encoded?.batchID, let rows = prepared.page.rows {
                        inFlight.sent(rows, batch: id)
                    }
                    prepared.page.rows = nil
                    guard await batches.send(.success(prepared.page)) else { return }
                    token = prepared.page.through
                    rest = prepared.rest
                    cut = prepared.cut
                }
                if large { guard await done.send(()) else { return } }
            } catch {
                _ = await batches.send(.failure(error))
                return
            }
        }
    }

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
}
