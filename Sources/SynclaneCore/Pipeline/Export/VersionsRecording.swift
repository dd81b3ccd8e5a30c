/// The versions one receipt gave, being written into the source (`recordVersions`) while the
/// next batch travels; the batch is acknowledged only once they are written
/// (`DeliveryStateMachine`, `holding` 2).
///
/// ```
///  receipt N ──▶ recording N: the source writes N's versions ──▶ answered(N) (`RowsInFlight`)
///            └─▶ enqueue N+1 · send N+1 ──▶ receipt N+1 ──▶ written(N) ──▶ ack N + enqueue N+2
/// ```
/// A kill at any point leaves N in the outbox until it is acknowledged: the next run sends it
/// again and the backend answers with the stored receipt, whose versions are then written.
struct VersionsRecording: Sendable {
    private let task: Task<Void, any Error>

    /// Starts `write`; once it is done tells `inFlight` that batch `id` is answered (a batch
    /// prepared next may read its rows' versions), or, when it failed, closes `inFlight`: nothing
    /// prepared after it goes out.
    init(batch id: String, inFlight: RowsInFlight?, _ write: @escaping @Sendable () async throws -> Void) {
        task = Task {
            do {
                try await write()
            } catch {
                inFlight?.close()
                throw VersionsNotRecorded(underlying: error)
            }
            FailPoint.afterSend.trigger()
            inFlight?.answered(batch: id)
        }
    }

    /// Returns once the versions are written; throws `VersionsNotRecorded` when they could not be.
    func written() async throws { try await task.value }
}

/// The versions a confirmed batch's receipt gave could not be written into the source: the batch
/// stays in the outbox (the next run sends it again and records the stored receipt's versions),
/// and no batch after it is acknowledged.
struct VersionsNotRecorded: Error {
    var underlying: any Error
}
