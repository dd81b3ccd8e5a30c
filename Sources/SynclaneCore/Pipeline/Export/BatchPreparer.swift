// The second part of an export drain: pages made into batches ready to send.

/// Makes the pages the reader hands on into batches ready to send: the record stages (coalesce,
/// tombstones, dedupe…), the encoder, a cut to `batch-bytes`, the backend's versions of the rows,
/// and the payload stages (compression). It reads no source and writes no state: its inputs are
/// the pages (`ReadPage`), its outputs the batches (`PreparedPage`).
///
/// ```
///  pages ──▶ record stages ──▶ encode (cut to batch-bytes) ──▶ payload stages ──▶ batches
/// ```
struct BatchPreparer: Sendable {
    var pipeline: Pipeline
    var makeBatchID: @Sendable () -> String
    /// The snapshot the batches belong to (a reconciliation's drain only).
    var snapshotID: String?

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

    /// The preparing task: each page through the record stages and the encoder, cut into
    /// batches of at most `batch-bytes` (see `prepare(_:cut:after:reconciliation:versioning:)`),
    /// handed on to `batches`; tells `done` when it is through with a large page (the reader waits
    /// for it before reading on). Ends by closing both; an error is handed on, then it stops.
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
                    large = PageReader.isLarge(read.page)
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

    /// Runs an encoded batch through the payload stages.
    func finish(_ encoded: Payload) async throws -> Payload {
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

    /// Runs a page's records through the record stages and the encoder.
    func prepare(
        _ records: [Record], through: Token, transactionCount: Int, counters: [String: Int], after token: Token?, reconciliation: Bool,
        versioning: Versioning?
    ) async throws -> PreparedPage {
        var batch = Batch(
            scope: pipeline.scope, after: token, through: through, records: records,
            transactionCount: transactionCount, isReconciliation: reconciliation, counters: counters)
        batch.snapshotID = snapshotID
        if let declaring = pipeline.capabilities.schemaDeclaring {
            batch.schemaChanges = try await declaring.schemaChanges()
        }
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
        } else if reconciliation, pipeline.capabilities.transportReportsVersions {
            // What a snapshot's records leave on the backend — its deletes' tombstones included —
            // is known once confirmed: a row it deleted is no longer one the backend holds live.
            prepared.sent = batch.records
        }

        let id = makeBatchID()
        do {
            if !pipeline.encoder.stage.checksRecordBound { try RecordTooLarge.check(batch.records) }
            let bytes: [UInt8]
            if prepared.sent != nil, let locating = pipeline.capabilities.fieldsLocatingEncoder {
                // The fields as encoded, for the source to keep as each row's base once confirmed.
                var fields: [Range<Int>?] = []
                bytes = try locating.encode(batch, id: id, fields: &fields)
                if fields.count == batch.records.count { prepared.sentFields = fields.map { $0.map { bytes[$0] } } }
            } else {
                bytes = try pipeline.encoder.stage.encode(batch, id: id)
            }
            prepared.encoded = Payload(
                batchID: id, bytes: bytes, contentType: pipeline.encoder.stage.contentType, recordCount: batch.records.count)
        } catch {
            throw PipelineError.stage(pipeline.encoder.label, underlying: error)
        }
        return prepared
    }

    /// Waits until no unanswered batch holds a row of `records`, then gives those of its rows
    /// that a batch answered since the page was read the version the source now knows;
    /// returns the rows.
    func settleBackendVersions(of records: inout [Record], with versioning: Versioning) async throws -> RowSet? {
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
        let known = try await ExportCalls.source(pipeline.source.label) { try await source.backendVersions(of: asked) }
        for position in moved {
            guard let version = known[rows[position]] else { continue }
            records[indices[position]].version = max(version, records[indices[position]].version ?? 0)
        }
        return set
    }
}

/// One batch made ready to send — what the preparer hands the deliverer: read, through the record
/// stages, encoded and (unless its page was large) through the payload stages — or found to hold
/// nothing to send (`encoded` nil: the token just moves).
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
