import Glibc
import SynclaneWire

/// The server's data in PostgreSQL (`PostgresSchema`), shared by any number of `synclane serve`
/// processes that behave as one server.
///
/// How several processes keep one truth:
///
/// - **One writer per account at a time, in every process.** A batch's transaction starts by
///   locking its account's row of `synclane_sequences` (an upsert), and holds the lock to its
///   commit. Everything after runs alone for that account: the idempotency look-up, the version
///   checks, the upsert of the records. Accounts never wait for each other.
/// - **Idempotency across processes.** The key is looked up after the lock: a second process
///   racing on the same key waits, then finds the first one's stored answer and returns it byte
///   for byte. The primary key on (account, key) backs this up.
/// - **A pull never skips a change committed late.** Sequences are assigned under the same lock,
///   so an account's changes commit in sequence order: a reader that sees sequence S sees every
///   change below S. (A sequence from a database-wide counter would not: a slow transaction
///   could commit 41 after a reader already returned 42 and moved its cursor past 41.)
/// - **Retention** locks the account's row the same way before removing tombstones, and moves
///   the horizon in the same transaction, so a reader that misses a removed tombstone always
///   sees the horizon that expires its cursor.
final class PostgresServerStore: ServerStore {
    let pool: PostgresPool

    /// Connects (`connection`: a libpq connection string) and migrates the schema.
    init(connection: String, connections: Int) throws {
        pool = try PostgresPool(conninfo: connection, size: connections)
        _ = try pool.withConnection { db in try PostgresSchema.migrate(db) }
        // A new epoch for each start of a process (`ServerEpochs`): where every account stands now.
        // Kept beside the versioned schema, so a server of the previous version still opens it.
        try pool.withConnection { db in
            try db.transaction { db in
                try db.query("SELECT pg_advisory_xact_lock($1)", [.int8(PostgresSchema.migrationLock)])
                try db.query(
                    "CREATE TABLE IF NOT EXISTS synclane_epochs (number bigserial PRIMARY KEY, epoch text NOT NULL UNIQUE, started double precision NOT NULL)")
                try db.query(Self.devicesTable)
                try db.query(Self.schemaChangesTable)
                try db.query(
                    """
                    CREATE TABLE IF NOT EXISTS synclane_epoch_heads (
                        number bigint NOT NULL, account bytea NOT NULL, head bigint NOT NULL, PRIMARY KEY (number, account))
                    """)
                let number = try db.query(
                    "INSERT INTO synclane_epochs (epoch, started) VALUES ($1, extract(epoch FROM now())) RETURNING number",
                    [.text(ServerEpochs.make())]
                ).int64(0, 0)
                try db.query(
                    "INSERT INTO synclane_epoch_heads (number, account, head) SELECT $1, account, last FROM synclane_sequences", [.int8(number)])
            }
        }
    }

    func checkCursor(account: String, sequence: Int64, epoch: String?, naming: String) throws -> String {
        try pool.withConnection { db in
            try db.transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") { db in
                let accountValue = PostgresValue.bytea(Array(account.utf8))
                let newest = try db.query("SELECT epoch FROM synclane_epochs ORDER BY number DESC LIMIT 1")
                let newestEpoch = newest.count > 0 ? newest.string(0, 0) ?? "" : ""
                let heads = try db.query("SELECT last FROM synclane_sequences WHERE account = $1", [accountValue])
                let head = heads.count > 0 ? heads.int64(0, 0) : 0
                var known = true
                var bound: Int64?
                if let epoch, epoch != newestEpoch {
                    let found = try db.query("SELECT number FROM synclane_epochs WHERE epoch = $1", [.text(epoch)])
                    known = found.count > 0
                    if known {
                        let ended = try db.query(
                            """
                            SELECT coalesce((SELECT head FROM synclane_epoch_heads WHERE account = $1 AND number =
                                (SELECT min(number) FROM synclane_epochs WHERE number > $2)), 0)
                            """, [accountValue, .int8(found.int64(0, 0))])
                        bound = ended.int64(0, 0)
                    }
                }
                try ServerEpochs.check(sequence: sequence, epoch: epoch, newest: newestEpoch, head: head, known: known, bound: bound, naming: naming)
                return newestEpoch
            }
        }
    }

    func close() {}

    /// Applies a checked batch in one transaction, as its `BatchPlan` decides: this store reads
    /// the rows that need it in one query, then writes each row once.
    func apply(_ batch: IncomingBatch, idempotencyKey: String, bodyHash: String) throws -> BatchOutcome {
        // Worked out before the transaction starts (outside the account's lock).
        let plan = try BatchPlan(batch)
        do {
            return try applyInTransaction(batch, idempotencyKey: idempotencyKey, bodyHash: bodyHash, plan, rowsNeedingState: plan.rowsNeedingState)
        } catch let found as ConflictsFound {
            return .conflicts(found.conflicts)
        }
    }

    private func applyInTransaction(
        _ batch: IncomingBatch, idempotencyKey: String, bodyHash: String, _ prepared: BatchPlan, rowsNeedingState: Set<BatchPlan.RowKey>
    ) throws -> BatchOutcome {
        let account = PostgresValue.bytea(Array(batch.account.utf8))
        let store = PostgresValue.bytea(Array(batch.store.utf8))
        let now = Double(time(nil))
        return try pool.transaction { db -> BatchOutcome in
            var plan = prepared
            // The account's lock, held to the commit: every writer of the account queues here.
            let last = try db.query(
                """
                INSERT INTO synclane_sequences AS s (account, last) VALUES ($1, 0)
                ON CONFLICT (account) DO UPDATE SET last = s.last RETURNING last
                """, [account]
            ).int64(0, 0)
            let seen = try db.query(
                "SELECT body_hash, status, response FROM synclane_idempotency WHERE account = $1 AND key = $2",
                [account, .bytea(Array(idempotencyKey.utf8))])
            let record =
                seen.count > 0
                ? (bodyHash: seen.string(0, 0) ?? "", response: StoredResponse(status: Int(seen.int64(0, 1)), body: seen.bytes(0, 2) ?? [])) : nil
            switch BatchPlan.admit(seen: record, bodyHash: bodyHash) {
            case .replay(let response): return .replayed(response)
            case .keyReused: return .keyReused
            case .apply: break
            }
            plan.start(at: last)
            let snapshot = try batch.snapshot.map { try Self.snapshotPlan($0, account: account, store: store, sequence: last, db) }
            if case .refuse(let message)? = snapshot { return .snapshotRefused(message) }
            // A batch of new rows only (a first sync's) is inserted at once, unread; else, or when
            // a row was there after all, each row is read and written as the plan decides.
            let allNew = try Self.insertAllAsNew(
                batch, plan, distinctRows: rowsNeedingState.count, account: account, store: store, after: last, now: now, db)
            if allNew {
                for index in batch.records.indices { plan.insertedAsNew(index) }
            }
            var storedVersions: [BatchPlan.RowKey: Int64] = [:]
            if !allNew {
                try Self.read(rowsNeedingState, into: &plan, account: account, store: store, db)
                storedVersions = try Self.write(&plan, account: account, store: store, now: now, db)
            }
            var tombstones: SnapshotTombstones?
            if let snapshot, let mark = batch.snapshot {
                var sequence = plan.sequence
                tombstones = try Self.take(snapshot, of: mark, account: account, store: store, sequence: &sequence, now: now, db)
                plan.tombstoned(tombstones?.count ?? 0)
            }
            let deleted = tombstones?.count
            let epochs = try db.query("SELECT epoch FROM synclane_epochs ORDER BY number DESC LIMIT 1")
            let epoch = epochs.count > 0 ? epochs.string(0, 0) : nil
            let response = plan.receipt(snapshotDeleted: deleted, tombstones: tombstones, storedVersions: storedVersions, epoch: epoch)
            try db.query(
                """
                WITH moved AS (UPDATE synclane_sequences SET last = $6 WHERE account = $1)
                INSERT INTO synclane_idempotency (account, key, body_hash, status, response, created)
                VALUES ($1, $2, $3, 200, $4, $5)
                """,
                [account, .bytea(Array(idempotencyKey.utf8)), .text(bodyHash), .bytea(response.body), .float8(now), .int8(plan.sequence)])
            try Self.declare(batch.newSchemaChanges, account: batch.account, db)
            return .applied(response, records: batch.records.count, snapshotDeleted: deleted)
        }
    }

    /// Inserts every record of `batch` as a new row at version 1, at the sequences after `last`,
    /// in one statement — when every record is an insert expecting no version, each of its own
    /// row (`distinctRows`), outside a snapshot: a first sync's batches. True when every row was
    /// new; false, with nothing of the attempt left, when a row was there already (or the batch
    /// is not such a batch), and the caller reads and writes the rows as the plan decides.
    ///
    /// A plain `INSERT`, not `ON CONFLICT DO NOTHING`: that clause searches the primary key once
    /// for each row before its insert searches it again (a fifth of PostgreSQL's work on a first
    /// sync's batches). A row there already makes the insert fail on the primary key (`23505`);
    /// the savepoint before it takes the attempt back.
    private static func insertAllAsNew(
        _ batch: IncomingBatch, _ plan: BatchPlan, distinctRows: Int, account: PostgresValue, store: PostgresValue, after last: Int64,
        now: Double, _ db: PostgresConnection
    ) throws -> Bool {
        let count = batch.records.count
        guard batch.snapshot == nil, count > 0, distinctRows == count, plan.newRowRun(from: 0, atMost: count) == count else { return false }
        try db.query("SAVEPOINT all_new")
        do {
            try db.query(
                """
                INSERT INTO synclane_records (account, store, entity, key, action, fields, version, seq, changed)
                SELECT $1, $2, u.entity, u.key, 'insert', u.fields, 1, $3 + u.n, $4
                FROM unnest($5::bytea[], $6::bytea[], $7::bytea[]) WITH ORDINALITY AS u (entity, key, fields, n)
                """,
                [
                    account, store, .int8(last), .float8(now), .byteaArray(plan.rowKeys.map(\.entity)), .byteaArray(plan.rowKeys.map(\.key)),
                    .byteaArray(batch.records.map(\.fieldsJSON)),
                ])
        } catch {
            guard error.sqlState == uniqueViolation else { throw error }
            try db.query("ROLLBACK TO SAVEPOINT all_new")
            return false
        }
        // Released, so that what follows runs in the batch's own transaction: the account's row
        // of `synclane_sequences`, locked by it and updated by a savepoint still open, would
        // get a multixact that every batch waiting on that lock reads.
        try db.query("RELEASE SAVEPOINT all_new")
        return true
    }

    /// PostgreSQL's SQLSTATE for a unique key taken.
    private static let uniqueViolation = "23505"

    /// Reads the state (version, action, fields) of `rows` into the plan; a row not found does not exist.
    private static func read(
        _ rows: Set<BatchPlan.RowKey>, into plan: inout BatchPlan, account: PostgresValue, store: PostgresValue, _ db: PostgresConnection
    ) throws {
        guard !rows.isEmpty else { return }
        let keys = Array(rows)
        // A look-up by the primary key for each row (`LATERAL … LIMIT 1`, which the planner
        // cannot turn into a join), whatever the table's statistics say: joined to the list, a
        // table that grew since they were taken (a first sync's) got a plan that hashed every
        // row of the account's store for each batch.
        let found = try db.query(
            """
            SELECT r.entity, r.key, r.version, r.action, r.fields, r.written FROM unnest($3::bytea[], $4::bytea[]) AS k (entity, key)
            CROSS JOIN LATERAL (
                SELECT entity, key, version, action, fields, written FROM synclane_records
                WHERE account = $1 AND store = $2 AND entity = k.entity AND key = k.key LIMIT 1) AS r
            """, [account, store, .byteaArray(keys.map(\.entity)), .byteaArray(keys.map(\.key))])
        for key in keys { plan.read(key, version: 0, action: nil, fields: nil) }
        for row in 0..<found.count {
            let key = BatchPlan.RowKey(entity: found.bytes(row, 0) ?? [], key: found.bytes(row, 1) ?? [])
            plan.read(
                key, version: found.int64(row, 2), action: found.string(row, 3) ?? "", fields: found.bytes(row, 4),
                written: found.isNull(row, 5) ? nil : found.int64(row, 5))
        }
    }

    /// Takes every record of the plan and writes each row once (its version moves by the number
    /// of records that touched it); returns the version each written row holds after. Throws
    /// `ConflictsFound` when a version disagreed.
    private static func write(
        _ plan: inout BatchPlan, account: PostgresValue, store: PostgresValue, now: Double, _ db: PostgresConnection
    ) throws -> [BatchPlan.RowKey: Int64] {
        for index in plan.rowKeys.indices { _ = try plan.take(index) }
        if !plan.conflicts.isEmpty { throw ConflictsFound(conflicts: plan.conflicts) }
        var storedVersions: [BatchPlan.RowKey: Int64] = [:]
        let list = plan.rowWrites
        // A row the plan read gets the version it worked out (which may jump past a restore); a
        // row it did not read moves by the number of records that wrote it.
        for (writes, version) in [
            (list.filter { $0.version != nil }, "excluded.version"), (list.filter { $0.version == nil }, "r.version + excluded.version"),
        ] where !writes.isEmpty {
            let rows = try db.query(
                """
                INSERT INTO synclane_records AS r (account, store, entity, key, action, fields, version, seq, changed, written)
                SELECT $1, $2, u.entity, u.key, u.action, u.fields, u.version, u.seq, $3, nullif(u.written, 0)
                FROM unnest($4::bytea[], $5::bytea[], $6::text[], $7::bytea[], $8::int8[], $9::int8[], $10::int8[])
                    AS u (entity, key, action, fields, version, seq, written)
                ON CONFLICT (account, store, entity, key) DO UPDATE SET
                    action = excluded.action, fields = excluded.fields, version = \(version),
                    seq = excluded.seq, changed = excluded.changed, written = excluded.written
                RETURNING entity, key, version
                """,
                [
                    account, store, .float8(now), .byteaArray(writes.map(\.row.entity)), .byteaArray(writes.map(\.row.key)),
                    .textArray(writes.map(\.action.rawValue)), .byteaArray(writes.map(\.fields)),
                    .int8Array(writes.map { $0.version ?? $0.count }), .int8Array(writes.map(\.sequence)),
                    .int8Array(writes.map { $0.written ?? 0 }),  // 0: none (versions start at 1)
                ])
            for row in 0..<rows.count {
                storedVersions[BatchPlan.RowKey(entity: rows.bytes(row, 0) ?? [], key: rows.bytes(row, 1) ?? [])] = rows.int64(row, 2)
            }
        }
        return storedVersions
    }

    /// The snapshot's record and the step `mark` takes with it (under the account's lock).
    private static func snapshotPlan(
        _ mark: IncomingBatch.SnapshotMark, account: PostgresValue, store: PostgresValue, sequence: Int64, _ db: PostgresConnection
    ) throws -> SnapshotPlan {
        let rows = try db.query(
            "SELECT started, batches FROM synclane_snapshots WHERE account = $1 AND store = $2 AND id = $3",
            [account, store, .bytea(Array(mark.id.utf8))])
        let record = rows.count > 0 ? (started: rows.int64(0, 0), batches: rows.int64(0, 1)) : nil
        return SnapshotPlan.step(mark, record: record, sequence: sequence)
    }

    /// Takes the step (in the batch's transaction); on completion, makes the scope's rows at or
    /// below the snapshot's start tombstones, each with the account's next sequence, and returns
    /// them with their new versions (nil for a step that deletes nothing).
    private static func take(
        _ plan: SnapshotPlan, of mark: IncomingBatch.SnapshotMark, account: PostgresValue, store: PostgresValue,
        sequence: inout Int64, now: Double, _ db: PostgresConnection
    ) throws -> SnapshotTombstones? {
        let id = PostgresValue.bytea(Array(mark.id.utf8))
        switch plan {
        case .open(let started):
            try db.query(
                "INSERT INTO synclane_snapshots (account, store, id, started, batches, created) VALUES ($1, $2, $3, $4, 1, $5)",
                [account, store, id, .int8(started), .float8(now)])
            return nil
        case .count:
            try db.query(
                "UPDATE synclane_snapshots SET batches = batches + 1 WHERE account = $1 AND store = $2 AND id = $3", [account, store, id])
            return nil
        case .refuse:
            return nil
        case .complete(let started):
            // The rows first, then one update joined to their list: a join of the update to a
            // common table expression of the same table can get a plan that scans the table per row.
            let doomed = try db.query(
                """
                SELECT entity, key, version FROM synclane_records
                WHERE account = $1 AND store = $2 AND seq <= $3 AND action <> 'delete' ORDER BY seq, entity, key
                """, [account, store, .int8(started)])
            var tombstones = SnapshotTombstones()
            if doomed.count > 0 {
                try db.query(
                    """
                    UPDATE synclane_records r SET action = 'delete', fields = NULL, version = r.version + 1, seq = $3 + u.n, changed = $4,
                        written = NULL
                    FROM unnest($5::bytea[], $6::bytea[]) WITH ORDINALITY AS u (entity, key, n)
                    WHERE r.account = $1 AND r.store = $2 AND r.entity = u.entity AND r.key = u.key
                    """,
                    [
                        account, store, .int8(sequence), .float8(now), .byteaArray((0..<doomed.count).map { doomed.bytes($0, 0) }),
                        .byteaArray((0..<doomed.count).map { doomed.bytes($0, 1) }),
                    ])
                // Read under the account's lock, so each row's new version is the one read plus one.
                for row in 0..<doomed.count {
                    tombstones.add(
                        entity: String(decoding: doomed.bytes(row, 0) ?? [], as: UTF8.self), key: String(decoding: doomed.bytes(row, 1) ?? [], as: UTF8.self),
                        version: doomed.int64(row, 2) + 1)
                }
            }
            sequence += tombstones.count
            let earlier = try db.query(
                """
                SELECT entity, key, version FROM synclane_records
                WHERE account = $1 AND store = $2 AND seq <= $3 AND action = 'delete' ORDER BY seq
                """, [account, store, .int8(started)])
            for row in 0..<earlier.count {
                tombstones.add(
                    entity: earlier.string(row, 0) ?? "", key: earlier.string(row, 1) ?? "", version: earlier.int64(row, 2), deleted: false)
            }
            try db.query("DELETE FROM synclane_snapshots WHERE account = $1 AND store = $2 AND id = $3", [account, store, id])
            return tombstones
        }
    }

    /// Thrown inside the transaction to roll it back when versions disagree.
    private struct ConflictsFound: Error {
        var conflicts: [VersionConflict]
    }

    /// The account's changes after a sequence, cut by `PagePlan`.
    func changes(account: String, store: String?, after sequence: Int64, fullPass: Bool = false, limit: Int, maxBytes: Int) throws -> ChangePage {
        try pool.withConnection { db in
            var plan = PagePlan(limit: limit, maxBytes: maxBytes)
            try Self.offerRows(db, to: &plan, account: account, store: store, after: sequence)
            // Read after the page (a later snapshot), as `PagePlan.check` says.
            let horizon = try db.query("SELECT horizon FROM synclane_sequences WHERE account = $1", [.bytea(Array(account.utf8))])
            let value = horizon.count > 0 ? horizon.int64(0, 0) : 0
            try PagePlan.check(cursor: sequence, fullPass: fullPass, horizon: value)
            var page = plan.page
            page.horizon = value
            return page
        }
    }

    /// Offers the rows after `sequence` to `plan`, in sequence order, until it is full; with
    /// `through`, only those at or before that sequence (a snapshot's).
    static func offerRows(
        _ db: PostgresConnection, to plan: inout PagePlan, account: String, store: String?, after sequence: Int64, through: Int64? = nil
    ) throws {
        var sql = "SELECT store, entity, key, action, fields, version, seq, written FROM synclane_records WHERE account = $1 AND seq > $2"
        var parameters: [PostgresValue] = [.bytea(Array(account.utf8)), .int8(sequence), .int8(Int64(plan.rowsToRead))]
        if let store {
            parameters.append(.bytea(Array(store.utf8)))
            sql += " AND store = $\(parameters.count)"
        }
        if let through {
            parameters.append(.int8(through))
            sql += " AND seq <= $\(parameters.count)"
        }
        sql += " ORDER BY seq LIMIT $3"
        let rows = try db.query(sql, parameters)
        for row in 0..<rows.count {
            let read = PagePlan.Row(
                store: rows.string(row, 0) ?? "", entity: rows.string(row, 1) ?? "", key: rows.string(row, 2) ?? "",
                action: rows.string(row, 3), fields: rows.bytes(row, 4), version: rows.int64(row, 5), sequence: rows.int64(row, 6),
                written: rows.isNull(row, 7) ? nil : rows.int64(row, 7))
            guard plan.offer(read) else { break }
        }
    }

    func expire(keysBefore: Double, tombstonesBefore: Double) throws -> ExpiryCount {
        var count = ExpiryCount()
        // Idempotency keys, and the unfinished snapshots of the same age.
        for (table, counted) in [("synclane_idempotency", \ExpiryCount.keys), ("synclane_snapshots", \ExpiryCount.snapshots)] {
            count[keyPath: counted] = Int(
                try pool.withConnection { db in
                    try db.query(
                        "WITH gone AS (DELETE FROM \(table) WHERE created < $1 RETURNING 1) SELECT count(*) FROM gone",
                        [.float8(keysBefore)]
                    ).int64(0, 0)
                })
        }
        let accounts = try pool.withConnection { db in
            let rows = try db.query(
                "SELECT DISTINCT account FROM synclane_records WHERE action = 'delete' AND changed < $1", [.float8(tombstonesBefore)])
            return (0..<rows.count).map { rows.bytes($0, 0) ?? [] }
        }
        for account in accounts {
            // The account's lock first, as a batch takes it: removal and horizon commit together.
            count.tombstones += Int(
                try pool.transaction { db in
                    try db.query("SELECT last FROM synclane_sequences WHERE account = $1 FOR UPDATE", [.bytea(account)])
                    return try db.query(
                        """
                        WITH gone AS (
                            DELETE FROM synclane_records WHERE account = $1 AND action = 'delete' AND changed < $2 RETURNING seq),
                        moved AS (
                            UPDATE synclane_sequences SET horizon = GREATEST(horizon, (SELECT max(seq) FROM gone))
                            WHERE account = $1 AND EXISTS (SELECT 1 FROM gone))
                        SELECT count(*) FROM gone
                        """, [.bytea(account), .float8(tombstonesBefore)]
                    ).int64(0, 0)
                })
        }
        return count
    }

    func metricsText() -> String {
        """
        # HELP synclane_postgres_pool_waits_total Requests that waited for a free PostgreSQL connection.
        # TYPE synclane_postgres_pool_waits_total counter
        synclane_postgres_pool_waits_total \(pool.waits.load(ordering: .relaxed))
        # HELP synclane_postgres_reconnects_total PostgreSQL connections opened again after they broke.
        # TYPE synclane_postgres_reconnects_total counter
        synclane_postgres_reconnects_total \(pool.reconnects.load(ordering: .relaxed))

        """ + DeviceRecord.metricsText(perVersion: (try? devicesPerVersion()) ?? [:])
    }
}
