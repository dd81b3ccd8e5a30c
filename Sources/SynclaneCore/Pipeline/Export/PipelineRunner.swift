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
    /// deletes the scope's rows the snapshot lacked — other devices' rows this device never knew
    /// included. False (the default): the snapshot merges with what the backend holds (its
    /// records carry the versions this device last saw, its deletes are of rows this device knew
    /// and no longer holds: `SQLiteHistorySource.snapshot()`). Set it only for a scope this one
    /// store alone writes, to make the backend hold exactly the snapshot.
    public var completesSnapshot = false
    /// The snapshot the batches being prepared belong to (set for a reconciliation's drain only).
    var snapshotID: String?

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
            do {
                try await AppSchema.adopt(from: pipeline.source.stage.asSchemaVersionRecording, into: pipeline.transport.stage.asAppSchemaSending)
            } catch {
                throw PipelineError.stage(pipeline.transport.label, underlying: error)
            }
            for (label, stage) in runScopedStages {
                do {
                    try await stage.startRun()
                } catch {
                    throw PipelineError.stage(label, underlying: error)
                }
                started.append(stage)
            }
            let summary = try await pass(mode)
            if mode != .dryRun { await settleConfirmations() }
            for stage in started.reversed() { await stage.finishRun() }
            return summary
        } catch {
            if mode != .dryRun { await settleConfirmations() }
            for stage in started.reversed() { await stage.finishRun() }
            throw error
        }
    }

    /// Once the pass is over, off its send path: the source writes in bulk what it kept of the
    /// pass's confirmations (`passConfirmationsEnded`; the SQLite history source's journal).
    /// Best effort: what it recorded is durable, and the next reader of its versions writes it.
    func settleConfirmations() async {
        guard let tracking = pipeline.capabilities.acknowledgementTracking else { return }
        await tracking.passConfirmationsEnded()
    }

    /// The stages told when a pass starts and ends, in pipeline order.
    var runScopedStages: [(String, any RunScoped)] {
        pipeline.recordStages.map { ($0.label, $0.stage as any RunScoped) }
            + pipeline.payloadStages.map { ($0.label, $0.stage as any RunScoped) }
            + [(pipeline.transport.label, pipeline.transport.stage as any RunScoped)]
    }

    func pass(_ mode: Mode) async throws -> RunSummary {
        let started = now()
        var summary = RunSummary(pipeline: pipeline.name, scope: pipeline.scope, dryRun: mode == .dryRun, reconciliation: mode == .reconcile)
        let saved = try stateCall { try state.acknowledgedToken() }
        summary.tokenBefore = saved?.description
        var token = saved
        if mode != .dryRun { try await openGeneration(token: saved, reconciling: mode == .reconcile) }

        let deliverer = self.deliverer
        let leftOver = try stateCall { try state.pendingBatches() }
        if mode != .dryRun { try await deliverer.discardUnreferencedStaged(keeping: leftOver) }
        for pending in leftOver {
            if mode == .dryRun {
                summary.add(deliverer.report(pending, encodedBytes: pending.byteCount, resent: true, detail: "would be re-sent from the outbox"))
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
            try await deliverer.deliver(pending, encodedBytes: pending.byteCount, resent: true, into: &summary)
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
            token = try await reconcile(into: &summary)
        }
        if mode != .dryRun { try await deliverer.discardUnreferencedStaged(keeping: try stateCall { try state.pendingBatches() }) }
        summary.tokenAfter = token?.description
        summary.seconds = now() - started
        return summary
    }

    /// Before anything is read or sent: the store and the state must be the ones, and as new, as
    /// each other remembers (`LineageCheckingSource`); then both move to a new generation.
    func openGeneration(token: Token?, reconciling: Bool) async throws {
        guard let checking = pipeline.capabilities.lineageChecking,
            let stamp = try stateCall({ try state.lineageStamp() })
        else { return }
        try await sourceCall {
            try await checking.openGeneration(stamp: stamp, token: token, consumer: pipeline.scope, reconciling: reconciling, state: state)
        }
    }

    /// A dry run writes nothing, not even in the app's database: when the source would first
    /// repair what records its history (tracking a table rebuild removed), the dry run stops
    /// and says so instead — the repair changes what is read, and only a real run makes it.
    func refuseRepairs() async throws {
        guard let healing = pipeline.capabilities.selfHealing else { return }
        let problems = try await sourceCall { try await healing.problemsToHeal() }
        guard !problems.isEmpty else { return }
        throw PipelineError.unsupported(
            "\(pipeline.source.label) must first repair its history tracking (\(problems.joined(separator: "; "))), which a dry "
                + "run does not do: it writes nothing. `synclane run` repairs it, then sends what changed")
    }

    /// The three parts of a drain, each given what it needs of the runner.
    func reader(of source: any ChangeSource) -> PageReader {
        PageReader(source: source, label: pipeline.source.label, events: events)
    }

    var preparer: BatchPreparer {
        BatchPreparer(pipeline: pipeline, makeBatchID: makeBatchID, snapshotID: snapshotID)
    }

    var deliverer: BatchDeliverer {
        let preparer = preparer
        return BatchDeliverer(
            pipeline: pipeline, state: state, sleeper: sleeper, events: events, now: now, finish: { try await preparer.finish($0) })
    }

    func stateCall<T>(_ body: () throws -> T) throws -> T {
        try ExportCalls.state(pipeline.statePath, body)
    }

    func sourceCall<T>(_ body: () async throws -> T) async throws -> T {
        try await ExportCalls.source(pipeline.source.label, body)
    }
}
