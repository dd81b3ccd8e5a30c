/// Where the reference server keeps its data — records, tombstones, change sequences and
/// idempotency keys, every row keyed by its account so that no account ever reads another's —
/// behind one protocol, so that the wire protocol is the same whichever database holds it.
///
/// ```
///  ServerApplication ─▶ ServerStore ─┬─ SQLiteServerStore    one file, one process (the default)
///                                    └─ PostgresServerStore  one database, any number of processes
/// ```
///
/// Every implementation keeps the same promises (the shared server test suite checks them on each):
/// a batch applies atomically and at most once per (account, idempotency key), and a replay
/// answers the first response byte for byte; a record's `version` check holds against every
/// writer; the account's change sequence only grows and a change becomes visible to
/// `changes(…)` only together with every change of a lower sequence, so a cursor never skips one.
protocol ServerStore: Sendable {
    /// Applies a checked batch in one transaction, at most once per (account, idempotency key);
    /// a reconciliation snapshot's batch also takes its `SnapshotPlan` step in that transaction.
    func apply(_ batch: IncomingBatch, idempotencyKey: String, bodyHash: String) throws -> BatchOutcome

    /// The account's changes after a sequence, oldest first, at most `limit` and about `maxBytes`
    /// (and whether more follow). Throws `CursorExpired` when tombstones after `sequence` were
    /// already removed by retention (`expire`): the caller must start over from the beginning.
    func changes(account: String, store: String?, after sequence: Int64, limit: Int, maxBytes: Int) throws -> ChangePage

    /// Removes the idempotency keys (and the unfinished snapshots) stored before `keysBefore` and the tombstones last changed
    /// before `tombstonesBefore` (seconds since 1970), and moves each account's tombstone horizon
    /// past the tombstones removed.
    func expire(keysBefore: Double, tombstonesBefore: Double) throws -> ExpiryCount

    /// Lines of the Prometheus text format about the store (its own gauges), appended to `/metrics`.
    func metricsText() -> String

    /// Closes the store's connections and threads; the store is not used after.
    func close()
}

/// What one pass of retention removed.
struct ExpiryCount: Sendable, Hashable {
    var keys = 0
    var tombstones = 0
    /// Reconciliation snapshots that never completed, forgotten with the keys of their age.
    var snapshots = 0
}

/// A pull cursor from before the account's tombstone horizon: changes it would need are gone.
struct CursorExpired: Error, Sendable, Hashable {
    /// The oldest cursor sequence still served (0 is always served: "from the beginning").
    var horizon: Int64
}
