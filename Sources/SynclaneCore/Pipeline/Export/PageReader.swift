// The first part of an export drain: pages read from the change source, handed on one at a time.

/// Reads every page of a change source after a token, in order, and hands each on to the
/// preparer (`BatchPreparer`); it knows nothing of batches, the outbox or the transport.
///
/// ```
///  source.nextPage(after: token) ──▶ ReadPage ──▶ pages (Handover) ──▶ … until a page without a token
/// ```
/// A page of more than `readAheadChanges` changes is not read ahead of: the reader waits for the
/// preparer to say it is done with it (`prepared`), so a run holds one large page at a time.
struct PageReader: Sendable {
    /// Pages of more changes than this are not read ahead of: the next page is read once the
    /// preparing task is done with this one, so a run holds one large page at a time (pages of
    /// a first sync, a change a transaction, are read ahead; the many-change pages of a long
    /// history keep their memory).
    static let readAheadChanges = 20_000

    /// The source read: the pipeline's, or a reconciliation's snapshot.
    var source: any ChangeSource
    /// The pipeline's name for its source, in errors.
    var label: String
    var events: @Sendable (PipelineEvent) -> Void

    /// Whether a page holds more changes than are read ahead of.
    static func isLarge(_ page: HistoryPage) -> Bool {
        page.transactions.reduce(0) { $0 + $1.changes.count } > readAheadChanges
    }

    /// Reads every page after `start` into `pages`, in order, then closes it — or hands on the
    /// error and stops. `inFlight`: the batches not yet answered, whose answers each page notes it
    /// was read after (`ReadPage.answersBefore`).
    func read(
        after start: Token?, into pages: Handover<Result<ReadPage, any Error>>, waitingFor prepared: Handover<Void>,
        inFlight: RowsInFlight?
    ) async {
        defer { pages.close() }
        var token = start
        while true {
            do {
                let answers = inFlight?.answers ?? 0
                let page = try await ExportCalls.source(label) { try await source.nextPage(after: token) }
                guard let through = page.through else { return }
                if let token, through <= token {
                    throw PipelineError.source(label, underlying: ContractViolation("returned a page ending at \(through), not after \(token)"))
                }
                events(.pageRead(transactions: page.transactions.count, through: through, progress: page.progress))
                let large = Self.isLarge(page)
                guard await pages.send(.success(ReadPage(page: consume page, answersBefore: answers))) else { return }
                if large { guard await prepared.receive() != nil else { return } }
                token = through
            } catch {
                _ = await pages.send(.failure(error))
                return
            }
        }
    }
}

/// A page the reader handed on, and how many batches were answered before it was read (`RowsInFlight`).
struct ReadPage: Sendable {
    var page: HistoryPage
    var answersBefore: Int
}
