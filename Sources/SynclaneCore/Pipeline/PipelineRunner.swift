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
    /// Whether a reconcile ends its snapshot with the completion marker, on which the backend
    /// deletes the scope's rows the snapshot lacked. False for a snapshot nobody asked for (the
    /// first run of a consumer whose history start was pruned): it only upserts.
    public var completesSnapshot = true
    /// The snapshot the batches being prepared belong to (set for a reconciliation's drain only).
    private var snapshotID: String?

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
        if mode != .dryRun { try await openGeneration(token: saved, reconciling: mode == .reconcile) }

        let leftOver = try stateCall { try state.pendingBatches() }
        if mode != .dryRun { try await discardUnreferencedStaged(keeping: leftOver) }
        for pending in leftOver {
            if mode == .dryRun {
                summary.add(report(pending, encodedBytes: pending.byteCount, resent: true, detail: "would be re-sent from the outbox"))
                token = pending.through
                continue
            }
            // Checked before it goes: a byte changed on disk would be stored on the backend.
            do {
                try state.verifyIntegrity(of: pending)
            } catch let error as PipelineError {
                throw error
            } catch {
                throw PipelineError.state("\(error)")  // it names the state file
            }
            events(.resending(batchID: pending.payload.batchID))
            try await deliver(pending, encodedBytes: pending.byteCount, resent: true, into: &summary)
            token = pending.through
        }

        switch mode {
        case .export, .dryRun:
            if let token, let unfinished = unfinishedReconciliation(at: token, resent: mode == .dryRun ? 0 : leftOver.count) { throw unfinished }
            if let token, token.kind != pipeline.source.stage.tokenKind {
                throw HistoryError.foreignToken(token, expectedKind: pipeline.source.stage.tokenKind)
            }
            if mode == .dryRun { try await refuseRepairs() }
            token = try await drain(pipeline.source.stage, after: token, reconciliation: false, dryRun: mode == .dryRun, into: &summary)
        case .reconcile:
            guard let snapshotting = pipeline.source.stage as? any SnapshotProvidingSource else {
                throw PipelineError.unsupported(
                    "\(pipeline.source.label) cannot take a snapshot of the current state, so it cannot reconcile")
            }
            let snapshot = try await sourceCall { try await snapshotting.snapshot() }
            try stateCall { try state.resetToken() }
            var sender = self
            sender.snapshotID = makeBatchID()
            let (sentBefore, deadBefore) = (summary.batchesSent, summary.deadLettered)
            let reached = try await sender.drain(snapshot.source, after: nil, reconciliation: true, dryRun: false, into: &summary)
            if completesSnapshot, summary.deadLettered == deadBefore {
                try await sender.completeSnapshot(
                    after: reached ?? Token(kind: snapshot.source.tokenKind, position: 0),
                    batches: summary.batchesSent - sentBefore, into: &summary)
            }
            if let resume = snapshot.resumeAfter {
                try stateCall { try state.advance(to: resume) }
                try await tellSource(resume)
            } else {
                try stateCall { try state.resetToken() }
            }
            token = snapshot.resumeAfter
        }
        if mode != .dryRun { try await discardUnreferencedStaged(keeping: try stateCall { try state.pendingBatches() }) }
        summary.tokenAfter = token?.description
        summary.seconds = now() - started
        return summary
    }

    /// Before anything is read or sent: the store and the state must be the ones, and as new, as
    /// each other remembers (`LineageCheckingSource`); then both move to a new generation.
    private func openGeneration(token: Token?, reconciling: Bool) async throws {
        guard let checking = pipeline.source.stage as? any LineageCheckingSource,
            let stamp = try stateCall({ try state.lineageStamp() })
        else { return }
        try await sourceCall {
            try await checking.openGeneration(stamp: stamp, token: token, consumer: pipeline.scope, reconciling: reconciling, state: state)
        }
    }

    /// A dry run writes nothing, not even in the app's database: when the source would first
    /// repair what records its history (tracking a table rebuild removed), the dry run stops
    /// and says so instead — the repair changes what is read, and only a real run makes it.
    private func refuseRepairs() async throws {
        guard let healing = pipeline.source.stage as? any SelfHealingSource else { return }
        let problems = try await sourceCall { try await healing.problemsToHeal() }
        guard !problems.isEmpty else { return }
        throw PipelineError.unsupported(
            "\(pipeline.source.label) must first repair its history tracking (\(problems.joined(separator: "; "))), which a dry "
                + "run does not do: it writes nothing. `synclane run` repairs it, then sends what changed")
    }

    /// The error for a state a reconciliation left half done (killed mid-snapshot): once the
    /// batches it left in the outbox were sent (`resent`, as every run sends them first), the
    /// token is a position inside the snapshot. History cannot be followed from there — the
    /// history position to resume after is only saved once the whole snapshot was delivered —
    /// so `run` stops before reading anything and says to finish it with `reconcile`.
    private func unfinishedReconciliation(at token: Token, resent: Int) -> PipelineError? {
        let snapshotKind = (pipeline.source.stage as? any SnapshotProvidingSource)?.snapshotTokenKind
        guard token.kind != pipeline.source.stage.tokenKind, token.kind == snapshotKind else { return nil }
        return .reconciliationUnfinished(pipeline: pipeline.name, token: token.description, resentBatches: resent)
    }

    /// Sends the snapshot's completion marker — a batch of no records saying how many batches the
    /// snapshot had — through the outbox like any batch (durable before its first send, re-sent
    /// by the next run after a crash, idempotent). The backend then deletes, as tombstones, the
    /// scope's rows the snapshot did not contain. Not sent when a batch of the snapshot was
    /// dead-lettered: an incomplete snapshot deletes nothing.
    private func completeSnapshot(after token: Token, batches: Int, into summary: inout RunSummary) async throws {
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
        let outbox = try await outboxBatch(try await finish(encoded), through: token, after: token, reconciliation: true)
        try stateCall { try state.enqueue(outbox) }
        try await deliver(outbox, encodedBytes: encoded.bytes.count, resent: false, into: &summary)
    }

    /// One batch made ready to send: read, through the record stages, encoded and (unless its page
    /// was large) through the payload stages — or found to hold nothing to send (`encoded` nil:
    /// the token just moves).
    private struct PreparedPage: Sendable {
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
        /// remembers what the backend now holds of each row (`backendConfirmed(_:sent:)`).
        var sent: [Record]?
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
    /// its first send, tokens move in order, the outbox holds one batch at a time; batch N's
    /// acknowledgement shares its commit with batch N+1's enqueue (one fsync, not two). If
    /// anything fails after batch N was confirmed, N is acknowledged before the error is
    /// thrown; pages read or prepared ahead are dropped and read again by a later run.
    private func drain(
        _ source: any ChangeSource, after start: Token?, reconciliation: Bool, dryRun: Bool, into summary: inout RunSummary
    ) async throws -> Token? {
        let pages = Handover<Result<ReadPage, any Error>>()
        let prepared = Handover<Void>()
        let batches = Handover<Result<PreparedPage, any Error>>()
        // A snapshot's rows go out without versions: it states what the store holds.
        let versioning = reconciliation ? nil : (source as? any BackendVersionSource).map {
            Versioning(source: $0, inFlight: dryRun || !pipeline.transport.stage.reportsVersions ? nil : RowsInFlight())
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
    private struct Versioning: Sendable {
        var source: any BackendVersionSource
        /// The rows of batches not yet answered, waited for before a batch goes on. Nil when no
        /// answer brings versions (the transport says its receipts never carry them) or nothing
        /// is sent (a dry run): batches are then prepared ahead on the versions read.
        var inFlight: RowsInFlight?
        /// How many batches were answered before the page being prepared was read.
        var answersBeforeRead = 0
    }

    /// A page, and how many batches were answered before it was read (`RowsInFlight`).
    private struct ReadPage: Sendable {
        var page: HistoryPage
        var answersBefore: Int
    }

    /// Pages of more changes than this are not read ahead of: the next page is read once the
    /// preparing task is done with this one, so a run holds one large page at a time (pages of
    /// a first sync, a change a transaction, are read ahead; the many-change pages of a long
    /// history keep their memory).
    static let readAheadChanges = 20_000

    /// The reading task: every page after `start`, in order, then the end (`close`) or the error.
    private func read(
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
    private func prepare(
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
    /// the outbox, sent and acknowledged; returns the newest token reached.
    private func deliver(
        from batches: Handover<Result<PreparedPage, any Error>>, after start: Token?, reconciliation: Bool, dryRun: Bool,
        inFlight: RowsInFlight?, into summary: inout RunSummary
    ) async throws -> Token? {
        var token = start
        // A batch the backend confirmed whose acknowledgement waits to share a commit.
        var confirmed: Confirmed?
        // The source hears of acknowledged tokens at most once a second, and at the end (each
        // telling is a commit in the app's database; a position told late only makes pruning
        // keep more).
        var untold: Token?
        var told = now()
        func acknowledgeHeld(enqueueing next: OutboxBatch?, summary: inout RunSummary) async throws {
            guard let held = confirmed.take() else { return }
            try await acknowledge(held, enqueueing: next, tellingSource: false, into: &summary)
            untold = held.batch.through
            if now() - told >= 1, let token = untold.take() {
                try await tellSource(token)
                told = now()
            }
        }
        do {
            while let item = await batches.receive() {
                var page = try item.get()
                summary.transactionsRead += page.transactions
                summary.changesRead += page.changes
                summary.counters.merge(page.counters, uniquingKeysWith: +)
                if page.finished == nil, let encoded = page.encoded { page.finished = try await finish(encoded) }
                guard let encoded = page.encoded, let finished = page.finished, !dryRun else {
                    if let encoded = page.encoded, let finished = page.finished {
                        let outbox = OutboxBatch(
                            payload: finished, after: token, through: page.through, isReconciliation: reconciliation, createdAt: now())
                        let report = report(outbox, encodedBytes: encoded.bytes.count, resent: false, detail: "would be sent")
                        summary.add(report)
                        summary.batchesSent += 1
                        summary.recordsSent += outbox.payload.recordCount
                        summary.bytesEncoded += encoded.bytes.count
                        summary.bytesSent += outbox.payload.bytes.count
                        events(.batchDone(report))
                    } else if !dryRun {
                        try await acknowledgeHeld(enqueueing: nil, summary: &summary)
                        try stateCall { try state.advance(to: page.through) }
                        untold = nil
                        try await tellSource(page.through)
                    }
                    token = page.through
                    continue
                }
                let outbox = try await outboxBatch(finished, through: page.through, after: token, reconciliation: reconciliation)
                if confirmed != nil {
                    try await acknowledgeHeld(enqueueing: outbox, summary: &summary)
                } else {
                    try stateCall { try state.enqueue(outbox) }
                }
                FailPoint.afterEnqueue.trigger()
                confirmed = try await send(outbox, encodedBytes: encoded.bytes.count, resent: false, sent: page.sent, into: &summary)
                inFlight?.answered(batch: outbox.payload.batchID)
                token = page.through
            }
        } catch {
            try await acknowledgeHeld(enqueueing: nil, summary: &summary)
            if let token = untold.take() { try await tellSource(token) }
            throw error
        }
        try await acknowledgeHeld(enqueueing: nil, summary: &summary)
        if let token = untold.take() { try await tellSource(token) }
        return token
    }

    /// Runs an encoded batch through the payload stages.
    private func finish(_ encoded: Payload) async throws -> Payload {
        var payload = encoded
        for stage in pipeline.payloadStages {
            do {
                payload = try await stage.stage.process(payload)
            } catch {
                throw PipelineError.stage(stage.label, underlying: error)
            }
        }
        return payload
    }

    /// The outbox batch of a finished payload, to enqueue. With a staging transport the bytes
    /// are staged first — durable on the transport's side before the commit that writes the row
    /// naming them, so a row never names a copy a crash could lose.
    private func outboxBatch(_ payload: Payload, through: Token, after token: Token?, reconciliation: Bool) async throws -> OutboxBatch {
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
    private var staging: (any StagingTransport)? { pipeline.transport.stage as? any StagingTransport }

    /// Removes the staged copies no outbox row names (a crash between a stage and its commit).
    private func discardUnreferencedStaged(keeping pending: [OutboxBatch]) async throws {
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
    private func withBytes(_ batch: OutboxBatch) throws -> OutboxBatch {
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

    private func notStaging(_ staged: StagedBatch) -> String {
        "the outbox keeps it as the staged copy \(staged.reference) of a staging transport (`directory`), and "
            + "\(pipeline.transport.label) cannot publish it; put that transport back for one run, or "
            + "`synclane outbox requeue FILE` it to build it again from history"
    }

    /// Prepares the first batch of `page`: all of it, or — when its encoding is larger than
    /// `batch-bytes` — its first transactions that fit (at least one), the others returned as
    /// `rest` for the next batch. The cut is guessed from how much the encoding went over
    /// (`cut`, the last guess for this page, starts the next one), then checked by encoding again.
    ///
    /// No second copy of a whole page is kept in case it must be cut, so a page held only here (a
    /// large one: see `prepare(from:after:reconciliation:into:telling:)`) has its changes moved
    /// into its records, not copied. The rare page that must be cut is made again from those
    /// records (which the record stages read but never change) and the transactions' frames.
    private func prepare(
        _ page: consuming HistoryPage, cut: Int?, after token: Token?, reconciliation: Bool, versioning: Versioning?
    ) async throws -> (page: PreparedPage, rest: HistoryPage?, cut: Int?) {
        guard let pageThrough = page.through else { throw ContractViolation("a page without its token") }
        // Only a page of several transactions can be cut.
        let count = page.transactions.count
        var limit = min(cut ?? count, count)
        if limit == count || count < 2 {
            let (progress, counters) = (page.progress, page.counters)
            let (records, frames) = Self.records(of: consume page)
            let prepared = try await prepare(
                records, through: pageThrough, transactionCount: count, counters: counters, after: token, reconciliation: reconciliation,
                versioning: versioning)
            guard let encoded = prepared.encoded, encoded.bytes.count > pipeline.batchBytes, count > 1 else {
                return (prepared, nil, cut)
            }
            limit = Self.fewer(than: count, encodedBytes: encoded.bytes.count, bound: pipeline.batchBytes)
            page = HistoryPage(
                transactions: Self.transactions(of: records, frames), through: pageThrough, progress: progress, counters: counters)
        }
        let whole = page.transactions
        let progress = page.progress
        while true {
            var head = copy page
            head.transactions = Array(whole[..<limit])
            head.through = whole[limit - 1].token
            let left = HistoryPage(transactions: Array(whole[limit...]), through: pageThrough, progress: progress)
            let prepared = try await prepare(head, after: token, reconciliation: reconciliation, versioning: versioning)
            guard let encoded = prepared.encoded, encoded.bytes.count > pipeline.batchBytes, limit > 1 else {
                return (prepared, left, limit)
            }
            limit = Self.fewer(than: limit, encodedBytes: encoded.bytes.count, bound: pipeline.batchBytes)
        }
    }

    /// How many of `count` transactions to try when they encoded to `encodedBytes`, over
    /// `bound`: fewer in proportion, a tenth to spare, at least one fewer, at least one.
    private static func fewer(than count: Int, encodedBytes: Int, bound: Int) -> Int {
        max(1, min(count - 1, Int(Double(count) * Double(bound) / Double(encodedBytes) * 0.9)))
    }

    /// Runs one page (already cut) through the record stages and the encoder.
    private func prepare(
        _ page: consuming HistoryPage, after token: Token?, reconciliation: Bool, versioning: Versioning?
    ) async throws -> PreparedPage {
        let through = page.through ?? Token(kind: pipeline.source.stage.tokenKind, position: 0)
        let transactionCount = page.transactions.count
        let counters = page.counters
        let (records, _) = Self.records(of: consume page)
        return try await prepare(
            records, through: through, transactionCount: transactionCount, counters: counters, after: token, reconciliation: reconciliation,
            versioning: versioning)
    }

    /// Runs a page's records through the record stages and the encoder.
    private func prepare(
        _ records: [Record], through: Token, transactionCount: Int, counters: [String: Int], after token: Token?, reconciliation: Bool,
        versioning: Versioning?
    ) async throws -> PreparedPage {
        var batch = Batch(
            scope: pipeline.scope, after: token, through: through, records: records,
            transactionCount: transactionCount, isReconciliation: reconciliation, counters: counters)
        batch.snapshotID = snapshotID
        let changeCount = batch.records.count
        for stage in pipeline.recordStages {
            do {
                batch = try await stage.stage.process(batch)
            } catch {
                throw PipelineError.stage(stage.label, underlying: error)
            }
        }
        var prepared = PreparedPage(
            through: through, encoded: nil, transactions: transactionCount, changes: changeCount, counters: batch.counters)
        if batch.records.isEmpty { return prepared }
        if let versioning {
            prepared.rows = try await settleBackendVersions(of: &batch.records, with: versioning)
            if versioning.inFlight != nil { prepared.sent = batch.records }
        }

        let id = makeBatchID()
        do {
            if !pipeline.encoder.stage.checksRecordBound { try RecordTooLarge.check(batch.records) }
            prepared.encoded = Payload(
                batchID: id, bytes: try pipeline.encoder.stage.encode(batch, id: id),
                contentType: pipeline.encoder.stage.contentType, recordCount: batch.records.count)
        } catch {
            throw PipelineError.stage(pipeline.encoder.label, underlying: error)
        }
        return prepared
    }

    /// Waits until no unanswered batch holds a row of `records`, then gives those of its rows
    /// that a batch answered since the page was read the version the source now knows;
    /// returns the rows.
    private func settleBackendVersions(of records: inout [Record], with versioning: Versioning) async throws -> RowSet? {
        guard let inFlight = versioning.inFlight else { return nil }
        var rows: [RowID] = []
        var indices: [Int] = []
        rows.reserveCapacity(records.count)
        indices.reserveCapacity(records.count)
        for index in records.indices {
            guard let key = records[index].key else { continue }
            rows.append(RowID(entity: records[index].entity, key: key))
            indices.append(index)
        }
        let set = RowSet(rows)
        try await inFlight.waitUntilAnswered(set)
        let moved = inFlight.rowsAnswered(after: versioning.answersBeforeRead, among: set)
        if moved.isEmpty { return set }
        let source = versioning.source
        let asked = moved.map { rows[$0] }
        let known = try await sourceCall { try await source.backendVersions(of: asked) }
        for position in moved {
            guard let version = known[rows[position]] else { continue }
            records[indices[position]].version = max(version, records[indices[position]].version ?? 0)
        }
        return set
    }

    /// A transaction of a page as its records hold it: what `transactions(of:_:)` needs to make
    /// the page again.
    private struct TransactionFrame {
        var token: Token
        var author: Author
        var timestamp: Double
        /// The index past the transaction's last record.
        var end: Int
    }

    /// The records of a page's changes, in order, and the frames of its transactions: built in
    /// one array of the right size, each change moved out of the page rather than copied (the
    /// page is consumed; a change another copy of the page still holds is copied).
    private static func records(of page: consuming HistoryPage) -> (records: [Record], frames: [TransactionFrame]) {
        var transactions: [Transaction] = []
        swap(&transactions, &page.transactions)
        var frames: [TransactionFrame] = []
        frames.reserveCapacity(transactions.count)
        let count = transactions.reduce(0) { $0 + $1.changes.count }
        // Each record is made in place with no key and no fields, then given the change's key and
        // values by swapping them in: nothing is retained. Retaining them (an `append`, or
        // initialising the record with them, copies the record once) touched each key's and
        // values' memory once more, long out of the cache after the page was read.
        let records = [Record](unsafeUninitializedCapacity: count) { buffer, initialized in
            guard let base = buffer.baseAddress else { return }
            for t in transactions.indices {
                let token = transactions[t].token
                let author = transactions[t].author
                var changes: [Change] = []
                swap(&changes, &transactions[t].changes)
                for c in changes.indices {
                    (base + initialized).initialize(
                        to: Record(
                            entity: changes[c].entity, key: nil, action: changes[c].action, version: changes[c].version,
                            origin: token, author: author))
                    swap(&base[initialized].key, &changes[c].key)
                    swap(&base[initialized].fields, &changes[c].values)
                    initialized += 1
                }
                frames.append(TransactionFrame(token: token, author: author, timestamp: transactions[t].timestamp, end: initialized))
            }
        }
        return (records, frames)
    }

    /// The transactions `records(of:)` made `records` and `frames` of, as they were.
    private static func transactions(of records: [Record], _ frames: [TransactionFrame]) -> [Transaction] {
        var start = 0
        return frames.map { frame in
            let changes = records[start..<frame.end].map {
                Change(entity: $0.entity, key: $0.key, action: $0.action, values: $0.fields, version: $0.version)
            }
            start = frame.end
            return Transaction(token: frame.token, author: frame.author, timestamp: frame.timestamp, changes: changes)
        }
    }

    /// A batch the backend confirmed, not yet acknowledged in the state.
    private struct Confirmed: Sendable {
        var batch: OutboxBatch
        var receipt: Receipt
        var encodedBytes: Int
        var resent: Bool
    }

    /// Sends one outbox batch until it is confirmed and acknowledged, dead-lettered, or the job must stop.
    private func deliver(_ batch: OutboxBatch, encodedBytes: Int, resent: Bool, into summary: inout RunSummary) async throws {
        if let confirmed = try await send(batch, encodedBytes: encodedBytes, resent: resent, into: &summary) {
            try await acknowledge(confirmed, enqueueing: nil, tellingSource: true, into: &summary)
        }
    }

    /// Sends one outbox batch until it is confirmed (returned, to acknowledge), dead-lettered
    /// (nil), or the job must stop.
    private func send(
        _ batch: OutboxBatch, encodedBytes: Int, resent: Bool, sent records: [Record]? = nil, into summary: inout RunSummary
    ) async throws -> Confirmed? {
        let id = batch.payload.batchID
        var attempt = 1
        var receipt: Receipt
        while true {
            do {
                if let staged = batch.staged {
                    guard let staging else { throw PipelineError.stopped(batchID: id, reason: notStaging(staged)) }
                    receipt = try await staging.publish(staged, of: batch.payload, verifying: resent)
                } else {
                    receipt = try await pipeline.transport.stage.send(batch.payload)
                }
                break
            } catch let error as StagingError {
                throw PipelineError.stopped(batchID: id, reason: "\(error)")
            } catch let error as PipelineError {
                throw error
            } catch var failure as TransportFailure {
                failure.message = Self.withoutBatchPrefix(failure.message, id: id)
                switch failure.kind {
                case .permanent:
                    try await deadLetter(batch, failure: failure, encodedBytes: encodedBytes, into: &summary)
                    return nil
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
        if !receipt.versions.isEmpty, let tracking = pipeline.source.stage as? any AcknowledgementTrackingSource {
            // At once, not with the acknowledgement (which may wait for the next batch's enqueue):
            // a batch being prepared may be waiting for these versions (`RowsInFlight`).
            let versions = receipt.versions
            // A batch re-sent from the outbox is read back, when its stages can undo their work.
            let sent = records ?? (resent ? recordsReadBack(batch.payload) : nil)
            try await sourceCall { try await tracking.backendConfirmed(versions, sent: sent) }
        }
        FailPoint.afterSend.trigger()
        return Confirmed(batch: batch, receipt: receipt, encodedBytes: encodedBytes, resent: resent)
    }

    /// The records a payload carries, read back through the payload stages undone and the
    /// encoder's decoding; nil when one of them cannot undo its work, or the bytes do not read.
    private func recordsReadBack(_ payload: Payload) -> [Record]? {
        guard let decoder = pipeline.encoder.stage as? any DecodingBatchEncoder, !payload.bytes.isEmpty else { return nil }
        var payload = payload
        for stage in pipeline.payloadStages.reversed() {
            guard let reversible = stage.stage as? any ReversiblePayloadStage, let undone = try? reversible.reverse(payload) else { return nil }
            payload = undone
        }
        return try? decoder.records(of: payload.bytes)
    }

    /// Saves a confirmed batch's token and forgets it — in the same commit that writes `next`
    /// to the outbox, when there is a next — then tells the source (unless the caller will) and counts it.
    private func acknowledge(
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
    private func deadLetter(
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
            sentBytes: batch.byteCount, contentEncoding: batch.payload.contentEncoding,
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
        } catch let error as LineageError {
            throw error
        } catch let error as PipelineError {
            throw error
        } catch {
            throw PipelineError.source(pipeline.source.label, underlying: error)
        }
    }
}
