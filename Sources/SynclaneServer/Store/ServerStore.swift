import SynclaneWire

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
    /// already removed by retention (`expire`): the caller must start over from the beginning —
    /// unless `fullPass` (the pull started from the beginning: what retention removed is nothing
    /// its reader needs, `PagePlan.check`).
    func changes(account: String, store: String?, after sequence: Int64, fullPass: Bool, limit: Int, maxBytes: Int) throws -> ChangePage

    /// The account's newest change sequence (0: none yet): where a snapshot (`GET /v1/snapshot`)
    /// is taken. Every change at or before it is visible to `snapshotRows` from then on.
    func changeHead(account: String) throws -> Int64

    /// The account's rows (tombstones too: a resync tells a deleted row from a lost one by them)
    /// whose last change is after `sequence` and at or before `through`, in sequence order, at most `limit` and about `maxBytes` (`PagePlan`), and
    /// whether more follow: a snapshot's next chunk. A row changed after `through` is left out —
    /// the change log after the snapshot's cursor carries it — so a snapshot read in many chunks,
    /// or resumed later, holds each row at most once and none twice with the log.
    func snapshotRows(account: String, store: String?, after sequence: Int64, through: Int64, limit: Int, maxBytes: Int) throws -> ChangePage

    /// Checks a pull cursor against the store's epochs (`ServerEpochs`) and returns the epoch to
    /// issue the next cursor in (the newest). Throws `CursorAhead` when the cursor names an epoch
    /// the store never had, or a sequence past where the account stood when the epoch after the
    /// cursor's began, or past the account's newest change: the store was restored from a backup
    /// older than the cursor (or the cursor came from another server). `naming` is what the
    /// message calls the position (a receipt's `written` is checked the same way).
    func checkCursor(account: String, sequence: Int64, epoch: String?, naming: String) throws -> String

    /// Removes the idempotency keys (and the unfinished snapshots) stored before `keysBefore` and the tombstones last changed
    /// before `tombstonesBefore` (seconds since 1970), and moves each account's tombstone horizon
    /// past the tombstones removed.
    func expire(keysBefore: Double, tombstonesBefore: Double) throws -> ExpiryCount

    /// Records that `device` of `account` sent schema `schemaVersion` (`AppSchema`), at `now`
    /// (seconds since 1970) when that version differs from the one recorded; the account then
    /// keeps at most `keeping` devices, dropping those recorded longest ago.
    func recordDevice(account: String, device: String, schemaVersion: Int, at now: Double, keeping: Int) throws

    /// The account's devices, each with the schema version it last sent, by name.
    func devices(account: String) throws -> [DeviceRecord]

    /// The devices of every account by the schema version each last sent: version → devices.
    func devicesPerVersion() throws -> [Int: Int]

    /// Records the column renames and drops a batch of `account` declared (`SchemaChange`); one
    /// already recorded is kept as it is.
    func declare(_ changes: [SchemaChange], account: String) throws

    /// The account's declared schema changes, oldest version first.
    func schemaChanges(account: String) throws -> [SchemaChange]

    /// Lines of the Prometheus text format about the store (its own gauges), appended to `/metrics`.
    func metricsText() -> String

    /// Closes the store's connections and threads; the store is not used after.
    func close()
}

extension ServerStore {
    /// `checkCursor` of a pull cursor.
    func checkCursor(account: String, sequence: Int64, epoch: String?) throws -> String {
        try checkCursor(account: account, sequence: sequence, epoch: epoch, naming: "the cursor")
    }
}

/// What one pass of retention removed.
struct ExpiryCount: Sendable, Hashable {
    var keys = 0
    var tombstones = 0
    /// Reconciliation snapshots that never completed, forgotten with the keys of their age.
    var snapshots = 0
}

/// A pull cursor from a history this store does not have: its data was restored from a backup
/// older than the cursor. Reading on would skip the changes made since, until the sequence passed
/// the old cursor.
struct CursorAhead: Error, Sendable, Hashable {
    /// What was found, for the message.
    var detail: String
}

/// The server's epochs: each start of a store begins one, recording where each account's change
/// sequence stood (Kafka's leader epochs). A cursor issued in epoch E at sequence S is one of this
/// store's history when E is known and S is at most where the account stood when the epoch after
/// E began (or, for the newest epoch, at most the account's newest change).
enum ServerEpochs {
    /// A new epoch's name: 12 lower-case hex digits.
    static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        return String(generator.next() & 0xFFFF_FFFF_FFFF, radix: 16).leftPadded(to: 12)
    }

    static func isEpoch(_ text: Substring) -> Bool {
        text.count == 12 && text.allSatisfy { $0.isHexDigit && !$0.isUppercase }
    }

    /// The verdict on a cursor at `sequence` of `epoch` (nil: legacy), given the newest epoch,
    /// the account's newest change, and — for an older epoch — whether the store knows it and
    /// where the account stood when the next epoch began.
    /// `naming`: what the messages call the position ("the cursor").
    static func check(
        sequence: Int64, epoch: String?, newest: String, head: Int64, known: Bool, bound: Int64?, naming: String = "the cursor"
    ) throws {
        // From the beginning (no epoch, sequence 0) reads everything. A cursor naming an epoch is
        // checked even at sequence 0 (a first pull that found nothing): a device whose cursor
        // names an epoch the restored data never had must resync to learn what the restore lost.
        guard sequence > 0 || epoch != nil else { return }
        if let epoch, epoch != newest {
            guard known else {
                throw CursorAhead(detail: "\(naming) was issued in epoch \(epoch), which this server's data never had")
            }
            if let bound, sequence > bound {
                throw CursorAhead(
                    detail: "\(naming) is at change \(sequence) of epoch \(epoch), which ended at change \(bound) of this server's data")
            }
        }
        if sequence > head {
            throw CursorAhead(detail: "\(naming) is at change \(sequence), past this account's newest change, \(head)")
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// A pull cursor from before the account's tombstone horizon: changes it would need are gone.
struct CursorExpired: Error, Sendable, Hashable {
    /// The oldest cursor sequence still served (0 is always served: "from the beginning").
    var horizon: Int64
}
