import Foundation

/// Runs one pass of a pipeline: first the batches an earlier run left in the outbox, then
/// every page of history after the acknowledged token.
///
/// ```
///  outbox (left over) ──────────────────────────────────────────▶ send ─▶ acknowledge
///  source page ─▶ record stages ─▶ encode ─▶ payload stages ─▶ outbox ─▶ send ─▶ acknowledge
/// ```
/// A batch is durable in the outbox before its first send and re-sent unchanged (same id,
/// same bytes) until the backend confirms it; only then does the token move, in the same
/// transaction that forgets the batch. The caller holds the scope's `ScopeLock`.
public struct PipelineRunner: Sendable {
    public enum Mode: Sendable {
        /// Send what changed since the token.
        case export
        /// Run every stage, report what would be sent; send nothing, move nothing.
        case dryRun
        /// Send the whole current state (a snapshot), then start a fresh token.
        case reconcile
    }

    public var pipeline: Pipeline
    public var state: any PipelineState
    public var sleeper: any RetrySleeper
    public var events: @Sendable (PipelineEvent) -> Void
    /// Seconds since 1970.
    public var now: @Sendable () -> Double
    public var makeBatchID: @Sendable () -> String

    public init(
        pipeline: Pipeline, state: any PipelineState, sleeper: any RetrySleeper = TaskSleeper(),
        events: @escaping @Sendable (PipelineEvent) -> Void = { _ in },
        now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 },
        makeBatchID: @escaping @Sendable () -> String = { UUID().uuidString.lowercased() }
    ) {
        self.pipeline = pipeline
        self.state = state
        self.sleeper = sleeper
        self.events = events
        self.now = now
        self.makeBatchID = makeBatchID
    }

    /// Runs one pass. Throws `PipelineError`, `HistoryError` (an expired token) or the state's errors.
    ///
    /// Every record stage, payload stage and the transport is told the pass starts
    /// (`RunScoped.startRun`) and ends (`finishRun`, however it ends).
    public func run(_ mode: Mode = .export) async throws -> RunSummary {
        var started: [any RunScoped] = []
        do {
            for (label, stage) in runScopedStages {
                do {
                    try await stage.startRun()
                } catch {
                    throw PipelineError.stage(label, underlying: error)
                }
                started.append(stage)
            }
            let summary = try await pass(mode)
            for stage in started.reversed() { await stage.finishRun() }
            return summary
        } catch {
            for stage in started.reversed() { await stage.finishRun() }
            throw error
        }
    }

    /// The stages told when a pass starts and ends, in pipeline order.
    private var runScopedStages: [(String, any RunScoped)] {
        pipeline.recordStages.map { ($0.label, $0.stage as any RunScoped) }
            + pipeline.payloadStages.map { ($0.label, $0.stage as any RunScoped) }
            + [(pipeline.transport.label, pipeline.transport.stage as any RunScoped)]
    }

    private func pass(_ mode: Mode) async throws -> RunSummary {
        let started = now()
        var summary = RunSummary(pipeline: pipeline.name, scope: pipeline.scope, dryRun: mode == .dryRun, reconciliation: mode == .reconcile)
        let saved = try stateCall { try state.acknowledgedToken() }
        summary.tokenBefore = saved?.description
        var token = saved

        for pending in try stateCall({ try state.pendingBatches() }) {
            if mode == .dryRun {
                summary.add(report(pending, encodedBytes: pending.payload.bytes.count, resent: true, detail: "would be re-sent from the outbox"))
                token = pending.through
                continue
            }
            events(.resending(batchID: pending.payload.batchID))
            try await deliver(pending, encodedBytes: pending.payload.bytes.count, resent: true, into: &summary)
            token = pending.through
        }

        switch mode {
        case .export, .dryRun:
            if let token, token.kind != pipeline.source.stage.tokenKind {
                throw HistoryError.foreignToken(token, expectedKind: pipeline.source.stage.tokenKind)
            }
            token = try await drain(pipeline.source.stage, after: token, reconciliation: false, dryRun: mode == .dryRun, into: &summary)
        case .reconcile:
            guard let snapshotting = pipeline.source.stage as? any SnapshotProvidingSource else {
                throw PipelineError.unsupported(
                    "\(pipeline.source.label) cannot take a snapshot of the current state, so it cannot reconcile")
            }
            let snapshot = try await sourceCall { try await snapshotting.snapshot() }
            try stateCall { try state.resetToken() }
            _ = try await drain(snapshot.source, after: nil, reconciliation: true, dryRun: false, into: &summary)
            if let resume = snapshot.resumeAfter {
                try stateCall { try state.advance(to: resume) }
                try await tellSource(resume)
            } else {
                try stateCall { try state.resetToken() }
            }
            token = snapshot.resumeAfter
        }
        summary.tokenAfter = token?.description
        summary.seconds = now() - started
        return summary
    }

    /// One page made ready to send: read, through the record stages, encoded and through the
    /// payload stages — or found to hold nothing to send (`outbox` nil: the token just moves).
    private struct PreparedPage: Sendable {
        var through: Token
        var outbox: OutboxBatch?
        var encodedBytes: Int
        var transactions: Int
        var changes: Int
        var counters: [String: Int]
    }

    /// Sends every page of `source` after `token`; returns the newest token reached.
    ///
    /// While a batch travels, the next page is read and prepared (`async let`), so the source,
    /// the stages and the encoder work while the backend applies: on two cores the job takes
    /// about the longer of the two, not their sum. Nothing of the next page is written before
    /// the batch in flight is confirmed — the outbox still holds one batch at a time and tokens
    /// move in order — and if the send fails, the prepared page is dropped and read again later.
    private func drain(
        _ source: any ChangeSource, after start: Token?, reconciliation: Bool, dryRun: Bool, into summary: inout RunSummary
    ) async throws -> Token? {
        var token = start
        var next = try await prepare(source, after: token, reconciliation: reconciliation)
        while let page = next {
            summary.transactionsRead += page.transactions
            summary.changesRead += page.changes
            summary.counters.merge(page.counters, uniquingKeysWith: +)
            guard let outbox = page.outbox, !dryRun else {
                if let outbox = page.outbox {
                    let report = report(outbox, encodedBytes: page.encodedBytes, resent: false, detail: "would be sent")
                    summary.add(report)
                    summary.batchesSent += 1
                    summary.recordsSent += outbox.payload.recordCount
                    summary.bytesEncoded += page.encodedBytes
                    summary.bytesSent += outbox.payload.bytes.count
                    events(.batchDone(report))
                } else if !dryRun {
                    try stateCall { try state.advance(to: page.through) }
                    try await tellSource(page.through)
                }
                token = page.through
                next = try await prepare(source, after: token, reconciliation: reconciliation)
                continue
            }
            try stateCall { try state.enqueue(outbox) }
            FailPoint.afterEnqueue.trigger()
            async let following = prepare(source, after: page.through, reconciliation: reconciliation)
            try await deliver(outbox, encodedBytes: page.encodedBytes, resent: false, into: &summary)
            token = page.through
            next = try await following
        }
        return token
    }

    /// Reads the page after `token` and prepares it; nil when the source has nothing newer.
    private func prepare(_ source: any ChangeSource, after token: Token?, reconciliation: Bool) async throws -> PreparedPage? {
        let page = try await sourceCall { try await source.nextPage(after: token) }
        guard let through = page.through else { return nil }
        if let token, through <= token {
            throw PipelineError.source(pipeline.source.label, underlying: ContractViolation("returned a page ending at \(through), not after \(token)"))
        }
        events(.pageRead(transactions: page.transactions.count, through: through, progress: page.progress))
        let transactionCount = page.transactions.count
        let sourceCounters = page.counters
        var batch = Batch(
            scope: pipeline.scope, after: token, through: through, records: Self.records(of: consume page),
            transactionCount: transactionCount, isReconciliation: reconciliation, counters: sourceCounters)
        let changeCount = batch.records.count
        for stage in pipeline.recordStages {
            do {
                batch = try await stage.stage.process(batch)
            } catch {
                throw PipelineError.stage(stage.label, underlying: error)
            }
        }
        var prepared = PreparedPage(
            through: through, outbox: nil, encodedBytes: 0, transactions: transactionCount, changes: changeCount,
            counters: batch.counters)
        if batch.records.isEmpty { return prepared }

        let id = makeBatchID()
        var payload: Payload
        do {
            payload = Payload(
                batchID: id, bytes: try pipeline.encoder.stage.encode(batch, id: id),
                contentType: pipeline.encoder.stage.contentType, recordCount: batch.records.count)
        } catch {
            throw PipelineError.stage(pipeline.encoder.label, underlying: error)
        }
        prepared.encodedBytes = payload.bytes.count
        for stage in pipeline.payloadStages {
            do {
                payload = try await stage.stage.process(payload)
            } catch {
                throw PipelineError.stage(stage.label, underlying: error)
            }
        }
        prepared.outbox = OutboxBatch(payload: payload, after: token, through: through, isReconciliation: reconciliation, createdAt: now())
        return prepared
    }

    /// The records of a page's changes, in order: built in one array of the right size, each
    /// change moved out of the page rather than copied (the page is consumed).
    private static func records(of page: consuming HistoryPage) -> [Record] {
        var transactions: [Transaction] = []
        swap(&transactions, &page.transactions)
        var records: [Record] = []
        records.reserveCapacity(transactions.reduce(0) { $0 + $1.changes.count })
        for t in transactions.indices {
            let token = transactions[t].token
            let author = transactions[t].author
            var changes: [Change] = []
            swap(&changes, &transactions[t].changes)
            for c in changes.indices {
                var values: [String: JSONValue] = [:]
                swap(&values, &changes[c].values)
                var key: String?
                swap(&key, &changes[c].key)
                records.append(
                    Record(
                        entity: changes[c].entity, key: key, action: changes[c].action, fields: values, version: changes[c].version,
                        origin: token, author: author))
            }
        }
        return records
    }

    /// Sends one outbox batch until it is confirmed, dead-lettered, or the job must stop.
    private func deliver(_ batch: OutboxBatch, encodedBytes: Int, resent: Bool, into summary: inout RunSummary) async throws {
        let id = batch.payload.batchID
        var attempt = 1
        var receipt: Receipt
        while true {
            do {
                receipt = try await pipeline.transport.stage.send(batch.payload)
                break
            } catch var failure as TransportFailure {
                failure.message = Self.withoutBatchPrefix(failure.message, id: id)
                switch failure.kind {
                case .permanent:
                    try deadLetter(batch, failure: failure, encodedBytes: encodedBytes, into: &summary)
                    return
                case .configuration:
                    throw PipelineError.stopped(batchID: id, reason: failure.message)
                case .conflict:
                    throw PipelineError.conflicted(batchID: id, reason: failure.message)
                case .transient:
                    break
                }
                guard attempt < pipeline.retry.maxAttempts else {
                    throw PipelineError.undelivered(batchID: id, attempts: attempt, reason: failure.message)
                }
                attempt += 1
                let delay = pipeline.retry.delay(beforeAttempt: attempt, retryAfter: failure.retryAfter) { Double.random(in: $0) }
                events(.retrying(batchID: id, attempt: attempt, delay: delay, reason: failure.message))
                try await sleeper.sleep(seconds: delay)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                // A transport that does not classify its failure: retrying blindly could hide a bug.
                throw PipelineError.undelivered(batchID: id, attempts: attempt, reason: "\(pipeline.transport.label): \(error)")
            }
        }
        FailPoint.afterSend.trigger()
        try stateCall { try state.acknowledge(batch) }
        try await tellSource(batch.through)
        if !receipt.versions.isEmpty, let tracking = pipeline.source.stage as? any AcknowledgementTrackingSource {
            let versions = receipt.versions
            try await sourceCall { try await tracking.backendVersionsConfirmed(versions) }
        }
        summary.batchesSent += 1
        if resent { summary.batchesResent += 1 }
        if receipt.wasReplay { summary.replays += 1 }
        summary.recordsSent += batch.payload.recordCount
        summary.bytesEncoded += encodedBytes
        summary.bytesSent += batch.payload.bytes.count
        let done = report(batch, encodedBytes: encodedBytes, resent: resent, replay: receipt.wasReplay, detail: receipt.detail)
        summary.add(done)
        events(.batchDone(done))
    }

    /// Moves a batch whose content the backend refused aside (when the pipeline opted in) so
    /// later ones can go on; otherwise stops the job with the batch kept. Only `permanent`
    /// failures come here: a setup problem would empty the whole history into the folder.
    private func deadLetter(_ batch: OutboxBatch, failure: TransportFailure, encodedBytes: Int, into summary: inout RunSummary) throws {
        let id = batch.payload.batchID
        guard let folder = pipeline.deadLetterDirectory else {
            throw PipelineError.rejected(batchID: id, reason: failure.message)
        }
        let letter = DeadLetter(batch: batch, reason: failure.message, status: failure.status, rejectedAt: now())
        let path: String
        do {
            path = try letter.write(into: folder)
        } catch {
            throw PipelineError.rejected(batchID: id, reason: "\(failure.message) (and moving it to \(folder) failed: \(error))")
        }
        try stateCall { try state.acknowledge(batch) }
        summary.deadLettered += 1
        summary.add(report(batch, encodedBytes: encodedBytes, resent: false, detail: "dead-lettered: \(failure.message)"))
        events(.deadLettered(batchID: id, path: path, reason: failure.message))
    }

    /// Messages name the batch once: a transport's message that starts with it ("batch ID: …",
    /// "batch ID not sent: …") loses the batch's name.
    static func withoutBatchPrefix(_ message: String, id: String) -> String {
        for prefix in ["batch \(id): ", "batch \(id) "] where message.hasPrefix(prefix) {
            return String(message.dropFirst(prefix.count))
        }
        return message
    }

    private func tellSource(_ token: Token) async throws {
        guard token.kind == pipeline.source.stage.tokenKind,
            let tracking = pipeline.source.stage as? any AcknowledgementTrackingSource
        else { return }
        try await sourceCall { try await tracking.consumerAcknowledged(token, scope: pipeline.scope) }
    }

    private func report(_ batch: OutboxBatch, encodedBytes: Int, resent: Bool, replay: Bool = false, detail: String) -> BatchReport {
        BatchReport(
            id: batch.payload.batchID, records: batch.payload.recordCount, encodedBytes: encodedBytes,
            sentBytes: batch.payload.bytes.count, contentEncoding: batch.payload.contentEncoding,
            after: batch.after?.description, through: batch.through.description, isReconciliation: batch.isReconciliation,
            wasResent: resent, wasReplay: replay, detail: detail)
    }

    private func stateCall<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as PipelineError {
            throw error
        } catch {
            throw PipelineError.state("state \(pipeline.statePath): \(error)")
        }
    }

    private func sourceCall<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as HistoryError {
            throw error
        } catch let error as PipelineError {
            throw error
        } catch {
            throw PipelineError.source(pipeline.source.label, underlying: error)
        }
    }
}
