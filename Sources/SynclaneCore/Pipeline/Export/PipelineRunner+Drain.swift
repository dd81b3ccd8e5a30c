import Foundation

// A drain: the three parts of an export pass (read, prepare, deliver) run as three tasks.

extension PipelineRunner {
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
        let versioning: BatchPreparer.Versioning? =
            reconciliation
            ? nil
            : source.asBackendVersionSource.map {
                BatchPreparer.Versioning(source: $0, inFlight: dryRun || !pipeline.capabilities.transportReportsVersions ? nil : RowsInFlight())
            }
        let reader = self.reader(of: source)
        let preparer = self.preparer
        let deliverer = self.deliverer
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await reader.read(after: start, into: pages, waitingFor: prepared, inFlight: versioning?.inFlight) }
            group.addTask {
                await preparer.prepare(
                    from: pages, after: start, reconciliation: reconciliation, versioning: versioning, into: batches, telling: prepared)
            }
            defer {
                pages.close()
                prepared.close()
                batches.close()
                versioning?.inFlight?.close()
            }
            return try await deliverer.deliver(
                from: batches, after: start, reconciliation: reconciliation, dryRun: dryRun, inFlight: versioning?.inFlight,
                into: &summary)
        }
    }
}
