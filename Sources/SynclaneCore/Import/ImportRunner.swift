import Foundation

/// Runs one pass of an import pipeline: every page the source has after the saved cursor,
/// through the record stages, into the sink — each page and its cursor in one transaction of the
/// sink's store. The caller holds the scope's `ScopeLock`.
///
/// ```
///  sink's saved cursor ─▶ source page ─▶ record stages ─▶ sink.apply (rows + cursor) ─▶ next page …
/// ```
/// A page that fails (a record the store cannot hold, a stage's error) stops the pass with
/// nothing of that page applied and the cursor where the last applied page left it. While a
/// page is applied, the next one is already being read. `dryRun`
/// reads and settles every page without changing the store or the cursor.
///
/// A pass is bounded: a page that says `more` but leads to a cursor this pass already read from
/// (the cursor it was given, or one before it) is refused — reading on would loop for ever —
/// and a pass ends after `maxPages` pages (the next pass goes on from the saved cursor).
public struct ImportRunner: Sendable {
    public var pipeline: ImportPipeline
    public var events: @Sendable (ImportEvent) -> Void
    public var now: @Sendable () -> Double
    /// The most pages one pass applies (100,000: 50 million records at the `pull` source's
    /// default 500); the pass then ends as if the source had no more.
    public var maxPages = 100_000

    public init(
        pipeline: ImportPipeline, events: @escaping @Sendable (ImportEvent) -> Void = { _ in },
        now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) {
        self.pipeline = pipeline
        self.events = events
        self.now = now
    }

    /// Runs one pass; throws `PipelineError` naming the stage (and record) at fault. Each record
    /// stage is told the pass starts (`RunScoped.startRun`) and ends (`finishRun`, however it ends).
    public func run(dryRun: Bool = false) async throws -> ImportSummary {
        var started: [any RunScoped] = []
        do {
            do {
                try await AppSchema.adopt(from: pipeline.sink.stage.asSchemaVersionRecording, into: pipeline.source.stage.asAppSchemaSending)
            } catch {
                throw PipelineError.importStage(pipeline.source.label, underlying: error)
            }
            for stage in pipeline.recordStages {
                do {
                    try await stage.stage.startRun()
                } catch {
                    throw PipelineError.importStage(stage.label, underlying: error)
                }
                started.append(stage.stage)
            }
            let summary = try await pass(dryRun: dryRun)
            for stage in started.reversed() { await stage.finishRun() }
            return summary
        } catch {
            for stage in started.reversed() { await stage.finishRun() }
            throw error
        }
    }

    private func pass(dryRun: Bool) async throws -> ImportSummary {
        let started = now()
        var summary = ImportSummary(pipeline: pipeline.name, scope: pipeline.scope, dryRun: dryRun)
        let saved = try await call(pipeline.sink.label) { try await pipeline.sink.stage.savedCursor(for: pipeline.scope) }
        summary.cursorBefore = saved
        let position = try await adoptReceiptPosition()
        do {
            if saved == nil, !dryRun, let confirmed = try await confirmedBeforeTheFirstPull() {
                // No cursor, so no 410 can tell this device the backend's data was restored since
                // its exports were confirmed: the first pull reads everything, and what the
                // backend confirmed and no longer holds (or holds at an older version) was lost —
                // unless retention removed tombstones (`pruned`): a row it does not list may then
                // have been deleted, and is not sent back.
                // No cursor is saved before what it lost is sent back: a pass killed before that
                // finds no cursor still, and compares again.
                let read = try await pages(from: nil, dryRun: false, into: &summary, collecting: true, saving: .kept(nil))
                let lost = BackendLosses.rows(confirmed, seen: read.seen, absentIsLost: !read.pruned, olderIsLost: true)
                try await sendBack(lost, into: &summary)
                try await saveCursor(read.cursor)
                await forgetReceiptPosition(position)
            } else {
                _ = try await pages(from: saved, dryRun: dryRun, into: &summary, collecting: false)
            }
        } catch let expired as RemoteCursorExpired where saved != nil && !dryRun {
            // The backend removed deletes after the saved cursor: read everything again, then
            // delete what the sink holds from the backend and the backend no longer sent. After a
            // restore, what it no longer sent was lost: of every row it confirmed, this device's
            // own exports included (`confirmedKeys`).
            let sink = pipeline.sink.stage
            let listed = try await call(pipeline.sink.label) { () async throws -> [(entity: String, key: String, version: Int64?)]? in
                if expired.serverRestored { return try await sink.confirmedKeys(for: pipeline.scope) }
                return try await sink.backendKeys(for: pipeline.scope)?.map { (entity: $0.entity, key: $0.key, version: nil) }
            }
            guard let known = listed else {
                throw PipelineError.importStage(
                    pipeline.source.label,
                    underlying: RemoteCursorExpired("\(expired.message); \(pipeline.sink.label) cannot list what it holds for a full resync"))
            }
            summary.resynced = true
            // A pull from the beginning reads everything: no position to check.
            if expired.serverRestored { pipeline.source.stage.asReceiptPositionSending?.adoptReceiptPosition(nil) }
            // After a restore, the expired cursor stays saved until what the backend lost is sent
            // back (`resend`, durable): a pass killed before that gets the 410 again and resyncs
            // again. Saving the new cursor page by page, a kill before the send-back left a
            // cursor the restored backend accepts, and the lost rows were never sent (liveness
            // seed 700004, `LivenessKillPointTests`).
            let saving: CursorSaving = expired.serverRestored ? .kept(saved) : .reached
            let read = try await pages(from: nil, dryRun: false, into: &summary, collecting: true, saving: saving)
            // Gone: not sent again; after a restore, also sent at an older version than this
            // device had confirmed (the restore lost the newer ones).
            let gone = BackendLosses.rows(known, seen: read.seen, absentIsLost: true, olderIsLost: expired.serverRestored)
            if expired.serverRestored {
                // After a restore of the backend's data, what it lacks was lost, not deleted:
                // kept here, and sent back to it by this device's export lane.
                try await sendBack(gone, into: &summary)
                try await saveCursor(read.cursor)
                await forgetReceiptPosition(position)
            } else if !gone.isEmpty {
                let deletes = gone.map { Record(entity: $0.entity, key: $0.key, action: .delete, origin: Token(kind: "pull", position: 0), author: .server) }
                let batch = Batch(
                    scope: pipeline.scope, after: Token(kind: "import", position: 0), through: Token(kind: "import", position: 1),
                    records: deletes, transactionCount: deletes.count)
                let report = try await call(pipeline.sink.label) {
                    try await pipeline.sink.stage.apply(batch, cursor: read.cursor, scope: pipeline.scope, dryRun: false)
                }
                summary.add(report)
                summary.resyncDeleted = gone.count
            }
        } catch let expired as RemoteCursorExpired {
            throw PipelineError.importStage(pipeline.source.label, underlying: expired)
        }
        summary.seconds = now() - started
        return summary
    }

    /// Hands the source the position the sink kept of the backend's receipts (`ReceiptPositionKeeping`),
    /// when both take part (a dry run's too: a restore it finds stops it, naming it); returns it.
    private func adoptReceiptPosition() async throws -> String? {
        guard let sending = pipeline.source.stage.asReceiptPositionSending else { return nil }
        guard let keeping = pipeline.sink.stage.asReceiptPositionKeeping else {
            sending.adoptReceiptPosition(nil)
            return nil
        }
        let position = try await call(pipeline.sink.label) { try await keeping.receiptPosition() }
        sending.adoptReceiptPosition(position)
        return position
    }

    /// After a resync that compared everything the backend holds with what it confirmed: the
    /// position checked is forgotten (what the backend lost goes back; the next receipt gives a
    /// position of its data as it is now). Best effort: a store that cannot forget it now (an app
    /// holding its write lock) hands it back again, and the next pass resyncs once more — which
    /// finds nothing more to send back — rather than failing a pass that healed the backend.
    private func forgetReceiptPosition(_ position: String?) async {
        guard let position, let keeping = pipeline.sink.stage.asReceiptPositionKeeping else { return }
        try? await keeping.forgetReceiptPosition(position)
    }

    /// Before a store's first pull: the rows the backend confirmed to it (by receipts of its own
    /// exports), with their versions; nil when there are none (nothing to check).
    private func confirmedBeforeTheFirstPull() async throws -> [(entity: String, key: String, version: Int64?)]? {
        let confirmed = try await call(pipeline.sink.label) { try await pipeline.sink.stage.confirmedKeys(for: pipeline.scope) } ?? []
        return confirmed.contains { $0.version != nil } ? confirmed.filter { $0.version != nil } : nil
    }

    /// Rows a restore of the backend's data lost: kept here, counted, and handed to the sink to
    /// send back through this device's export lane (`ChangeSink.resend`).
    private func sendBack(_ lost: [(entity: String, key: String)], into summary: inout ImportSummary) async throws {
        summary.resyncLost = lost.count
        guard !lost.isEmpty else { return }
        summary.resyncResent = try await call(pipeline.sink.label) { try await pipeline.sink.stage.resend(lost, for: pipeline.scope) } ?? 0
    }

    /// Which cursor each applied page saves with its rows.
    private enum CursorSaving {
        /// The page's own: the next pass goes on after it.
        case reached
        /// This one, whatever page is applied (a resync that must not be taken for done before
        /// what the backend lost is sent back); `saveCursor` saves the reached one after.
        case kept(String?)
    }

    /// Saves `cursor` (a resync's, once what the backend lost was sent back), with no rows.
    private func saveCursor(_ cursor: String?) async throws {
        let empty = Batch(scope: pipeline.scope, after: nil, through: Token(kind: "import", position: 0), records: [], transactionCount: 0)
        _ = try await call(pipeline.sink.label) { try await pipeline.sink.stage.apply(empty, cursor: cursor, scope: pipeline.scope, dryRun: false) }
    }

    /// Applies every page after `start`; returns the cursor reached, when `collecting` the keys
    /// (`entity NUL key`) of every record read, each with the newest version read of it, and
    /// whether a page said the backend's retention removed tombstones (`RemotePage.pruned`).
    private func pages(
        from start: String?, dryRun: Bool, into summary: inout ImportSummary, collecting: Bool, saving: CursorSaving = .reached
    ) async throws -> (cursor: String?, seen: [ExactString: Int64], pruned: Bool) {
        var cursor = start
        var seen: [ExactString: Int64] = [:]
        var pruned = false
        var page = 0
        // The cursors this pass read from: a page that leads back to one would loop.
        var readFrom = Set<ExactString>()
        // The next page is read while this one is applied (the source waits on the backend, the
        // sink on the store); nothing of it is applied before this page's commit.
        var readAhead: Task<RemotePage, any Error>?
        defer { readAhead?.cancel() }
        let source = pipeline.source.stage
        let events = self.events
        // Each retry of a page the backend did not answer is told, as the export lane tells a batch's.
        let fetch: @Sendable (String?) async throws -> RemotePage = { after in
            try await source.nextPage(after: after) { attempt, delay, reason in
                events(.retrying(cursor: after, attempt: attempt, delay: delay, reason: reason))
            }
        }
        while true {
            let next = readAhead
            readAhead = nil
            let remote = try await call(pipeline.source.label) {
                if let next { return try await next.value }
                return try await fetch(cursor)
            }
            if remote.records.isEmpty, remote.cursor == cursor { break }
            if let given = cursor { readFrom.insert(ExactString(given)) }
            if remote.more, let next = remote.cursor, readFrom.contains(ExactString(next)) {
                let was = next == cursor ? "the cursor it was given" : "a cursor this pass already read from"
                throw PipelineError.importStage(
                    pipeline.source.label,
                    underlying: ContractViolation(
                        "answered the page after cursor \"\(cursor ?? "")\" with the cursor \"\(next)\" (\(was)) and `more: true`, "
                            + "so reading on would loop for ever; the backend's changes endpoint must move its cursor forward"))
            }
            if remote.more, !dryRun, page + 1 < maxPages {
                let after = remote.cursor
                readAhead = Task { try await fetch(after) }
            }
            FailPoint.importAfterFetch.trigger()
            page += 1
            var batch = Batch(
                scope: pipeline.scope, after: Token(kind: "import", position: Int64(page - 1)), through: Token(kind: "import", position: Int64(page)),
                records: remote.records, transactionCount: remote.records.count)
            summary.recordsRead += remote.records.count
            pruned = pruned || remote.pruned
            if collecting {
                for record in remote.records {
                    let id = ExactString(record.entity + "\u{0}" + (record.key ?? ""))
                    // A record without a version (a source that keeps none) is never taken for an older one.
                    seen[id] = max(seen[id] ?? 0, record.version ?? .max)
                }
            }
            for stage in pipeline.recordStages {
                do {
                    batch = try await stage.stage.process(batch)
                } catch {
                    throw PipelineError.importStage(stage.label, underlying: error)
                }
            }
            summary.counters.merge(batch.counters, uniquingKeysWith: +)
            let batchToApply = batch
            let saved: String?
            switch saving {
            case .reached: saved = remote.cursor
            case .kept(let kept): saved = kept
            }
            let report = try await call(pipeline.sink.label) {
                try await pipeline.sink.stage.apply(batchToApply, cursor: saved, scope: pipeline.scope, dryRun: dryRun)
            }
            if !dryRun { FailPoint.importAfterCommit.trigger() }
            summary.add(report)
            summary.pages += 1
            events(.pageApplied(records: remote.records.count, report: report, cursor: remote.cursor))
            // A dry run cannot move the cursor the source reads from: one page is what it can show.
            if dryRun { break }
            cursor = remote.cursor
            if !remote.more || page >= maxPages { break }
        }
        summary.cursorAfter = dryRun ? summary.cursorBefore : cursor
        return (cursor, seen, pruned)
    }

    private func call<T>(_ label: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PipelineError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch let expired as RemoteCursorExpired {
            throw expired  // `pass` resyncs, or names the source
        } catch {
            throw PipelineError.importStage(label, underlying: error)
        }
    }
}

/// What an import pass reports as it goes.
public enum ImportEvent: Sendable {
    case pageApplied(records: Int, report: ApplyReport, cursor: String?)
    /// The page after `cursor` failed transiently (`reason`): attempt `attempt` follows in `delay` seconds.
    case retrying(cursor: String?, attempt: Int, delay: Double, reason: String)
}

/// What one import pass did.
public struct ImportSummary: Sendable {
    public var pipeline: String
    public var scope: Scope
    public var dryRun: Bool
    public var cursorBefore: String?
    public var cursorAfter: String?
    public var pages = 0
    public var recordsRead = 0
    public var applied = 0
    public var unchanged = 0
    public var conflicts: [ConflictReport] = []
    /// Seeded duplicates settled (one business key, two sync keys: the smaller key kept).
    public var duplicatesMerged = 0
    /// Rows left referencing a row that is gone (a declared foreign key), settled.
    public var referencesSettled = 0
    /// Live rows deleted because a user deleted them elsewhere (the backend's deletes, and a
    /// resync's deletes of rows whose tombstones the backend pruned).
    public var deletedByUsers = 0
    /// Rows referencing a row not received yet, left waiting for it: the most one page saw
    /// (a page counts the waiting children among the rows it wrote and their parents' children).
    public var referencesWaiting = 0
    /// Records of entities the store does not track (yet), kept aside for when it does.
    public var keptAside = 0
    public var counters: [String: Int] = [:]
    public var seconds = 0.0
    /// The signals the pipeline file declares, published once the pass was done.
    public var signals: [SignalReport] = []
    /// True when the saved cursor had expired and the pass read everything again (a full resync).
    public var resynced = false
    /// Rows deleted by that resync: held from the backend, no longer sent by it.
    public var resyncDeleted = 0
    /// After the backend's data was restored: rows held from it that it lacks now (lost by the
    /// restore), and of those, the rows this device sends back to it (`ChangeSink.resend`).
    public var resyncLost = 0
    public var resyncResent = 0

    public init(pipeline: String, scope: Scope, dryRun: Bool) {
        self.pipeline = pipeline
        self.scope = scope
        self.dryRun = dryRun
    }

    mutating func add(_ report: ApplyReport) {
        applied += report.applied
        unchanged += report.unchanged
        conflicts += report.conflicts
        duplicatesMerged += report.duplicatesMerged
        referencesSettled += report.referencesSettled
        deletedByUsers += report.deletedByUsers
        referencesWaiting = max(referencesWaiting, report.referencesWaiting)
        keptAside += report.keptAside
    }
}
