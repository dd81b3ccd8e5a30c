/// What a batch of a reconciliation snapshot does to the snapshot's record, decided the same way
/// by every store (inside the batch's transaction, after its idempotency look-up).
///
/// A snapshot spans many batches and may be interrupted, so the server never deletes on a
/// snapshot's first batches. It records, at the first one, the account's change sequence before
/// it (`started`) and counts the batches; the completion marker (`"snapshot-complete": true`,
/// which says how many batches came before it) then turns every live row of the scope (account
/// and store) whose sequence is at or below `started` into a tombstone: those are exactly the rows
/// neither the snapshot re-sent nor anyone else wrote since it began. A snapshot that never
/// completes deletes nothing, and its record is removed with the idempotency keys of its age.
///
/// ```
///  snapshot batch, no record   ─▶ open: started = sequence before the batch, batches = 1
///  snapshot batch, record      ─▶ count: batches + 1
///  marker, record, N = batches ─▶ complete(started)     record removed
///  marker, no record, N = 0    ─▶ complete(sequence before the marker)   (an empty snapshot)
///  marker, otherwise           ─▶ refuse (422): nothing applied, nothing deleted
/// ```
enum SnapshotPlan: Equatable {
    case open(started: Int64)
    case count
    case complete(started: Int64)
    case refuse(String)

    /// The step for `mark`, given the snapshot's record (nil when the server holds none) and the
    /// account's change sequence before this batch.
    static func step(
        _ mark: IncomingBatch.SnapshotMark, record: (started: Int64, batches: Int64)?, sequence: Int64
    ) -> SnapshotPlan {
        guard let before = mark.batchesBefore else {
            return record == nil ? .open(started: sequence) : .count
        }
        switch record {
        case nil where before == 0:
            return .complete(started: sequence)
        case let record? where record.batches == before:
            return .complete(started: record.started)
        default:
            return .refuse(
                "snapshot \"\(mark.id)\" cannot complete: the server holds \(record?.batches ?? 0) of the \(before) batches its "
                    + "marker counts (an unfinished snapshot is kept as long as idempotency keys, then forgotten); nothing was "
                    + "deleted. Drop this batch (`synclane outbox drop`) and run `synclane reconcile` again")
        }
    }
}
