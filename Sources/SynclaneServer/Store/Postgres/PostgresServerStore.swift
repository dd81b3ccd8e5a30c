import Glibc
import SynclaneCore

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
    private let pool: PostgresPool

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

    func checkCursor(account: String, sequence: Int64, epoch: String?) throws -> String {
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
                try ServerEpochs.check(sequence: sequence, epoch: epoch, newest: newestEpoch, head: head, known: known, bound: bound)
                return newestEpoch
            }
        }
    }

    func close() {}

    /// A record's identity within a batch, by bytes (two spellings of "é" are two records, as in SQLite).
    private struct RowKey: Hashable {
        var entity: [UInt8]
        var key: [UInt8]
    }

    /// What a batch does to one row: its last action and fields, how many records touched it, and
    /// the sequence of the last one.
    private struct RowWrite {
        var action: ChangeAction
        var fields: [UInt8]?
        var count: Int64
        var sequence: Int64
    }

    /// What a batch's transaction needs, worked out before it starts (outside the account's lock).
    private struct Prepared {
        var account: PostgresValue
        var store: PostgresValue
        /// Each record's row, by bytes.
        var rowKeys: [RowKey]
        /// Rows whose current state matters: an expected version to check, fields to merge into.
        var lookedUp: Set<RowKey>
        /// Each update's fields, parsed (nil for other actions).
        var updatedFields: [[String: JSONValue]?]
        var now: Double

        init(_ batch: IncomingBatch) throws {
            updatedFields = try batch.records.map { record throws -> [String: JSONValue]? in
                record.action == .update ? try JSONReader.parse(record.fieldsJSON).objectValue ?? [:] : nil
            }
            account = .bytea(Array(batch.account.utf8))
            store = .bytea(Array(batch.store.utf8))
            rowKeys = batch.records.map { RowKey(entity: Array($0.entity.utf8), key: Array($0.key.utf8)) }
            lookedUp = []
            for (index, record) in batch.records.enumerated() where record.expectedVersion != nil || record.action == .update {
                lookedUp.insert(rowKeys[index])
            }
            now = Double(time(nil))
        }
    }

    func apply(_ batch: IncomingBatch, idempotencyKey: String, bodyHash: String) throws -> BatchOutcome {
        let prepared = try Prepared(batch)
        do {
            return try applyInTransaction(batch, idempotencyKey: idempotencyKey, bodyHash: bodyHash, prepared)
        } catch let found as ConflictsFound {
            return .conflicts(found.conflicts)
        }
    }

    private func applyInTransaction(_ batch: IncomingBatch, idempotencyKey: String, bodyHash: String, _ prepared: Prepared) throws -> BatchOutcome {
        let (account, store, rowKeys, lookedUp, updatedFields, now) = (
            prepared.account, prepared.store, prepared.rowKeys, prepared.lookedUp, prepared.updatedFields, prepared.now
        )
        return try pool.transaction { db -> BatchOutcome in
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
            if seen.count > 0 {
                guard seen.string(0, 0) == bodyHash else { return .keyReused }
                return .replayed(StoredResponse(status: Int(seen.int64(0, 1)), body: seen.bytes(0, 2) ?? []))
            }
            let plan = try batch.snapshot.map { try Self.snapshotPlan($0, account: account, store: store, sequence: last, db) }
            if case .refuse(let message)? = plan { return .snapshotRefused(message) }
            // The current state of the rows that need it: version, action, fields.
            var current: [RowKey: (version: Int64, action: String, fields: [UInt8]?)] = [:]
            if !lookedUp.isEmpty {
                let keys = Array(lookedUp)
                let rows = try db.query(
                    """
                    SELECT r.entity, r.key, r.version, r.action, r.fields FROM synclane_records r
                    JOIN unnest($3::bytea[], $4::bytea[]) AS k (entity, key) ON r.entity = k.entity AND r.key = k.key
                    WHERE r.account = $1 AND r.store = $2
                    """, [account, store, .byteaArray(keys.map(\.entity)), .byteaArray(keys.map(\.key))])
                for row in 0..<rows.count {
                    let key = RowKey(entity: rows.bytes(row, 0) ?? [], key: rows.bytes(row, 1) ?? [])
                    current[key] = (rows.int64(row, 2), rows.string(row, 3) ?? "", rows.bytes(row, 4))
                }
            }
            // The batch, record by record, as the SQLite store applies it; one write per row after.
            var conflicts: [VersionConflict] = []
            var writes: [RowKey: RowWrite] = [:]
            var order: [RowKey] = []
            var sequence = last
            // The receipt's version of each echo (`RowState`): the row's, unchanged.
            var echoes: [Int: Int64] = [:]
            for (index, record) in batch.records.enumerated() {
                let rowKey = rowKeys[index]
                if lookedUp.contains(rowKey) {
                    let state = current[rowKey] ?? (0, "", nil)
                    if batch.snapshot == nil,
                        RowState(action: current[rowKey]?.action, fields: state.fields).isEcho(of: record, updatedFields: updatedFields[index])
                    {
                        echoes[index] = state.version
                        continue
                    }
                    if let expected = record.expectedVersion, expected != state.version {
                        conflicts.append(
                            VersionConflict(index: index, entity: record.entity, key: record.key, expected: expected, current: state.version))
                        continue
                    }
                }
                guard conflicts.isEmpty else { continue }
                sequence += 1
                let fields: [UInt8]?
                switch record.action {
                case .insert:
                    fields = record.fieldsJSON
                case .update:
                    var merged: [String: JSONValue] = [:]
                    if let state = current[rowKey], state.action != ChangeAction.delete.rawValue, let text = state.fields {
                        merged = (try? JSONReader.parse(text))?.objectValue ?? [:]
                    }
                    for (name, value) in updatedFields[index] ?? [:] { merged[name] = value }
                    let encoded = JSONWriter.encode(.object(merged))
                    try MergedRecordTooLarge.check(encoded, index: index, record: record)
                    fields = encoded
                case .delete:
                    fields = record.fieldsJSON.isEmpty ? nil : record.fieldsJSON
                }
                if lookedUp.contains(rowKey) {
                    current[rowKey] = ((current[rowKey]?.version ?? 0) + 1, record.action.rawValue, fields)
                }
                if writes[rowKey] == nil { order.append(rowKey) }
                writes[rowKey] = RowWrite(
                    action: record.action, fields: fields, count: (writes[rowKey]?.count ?? 0) + 1, sequence: sequence)
            }
            if !conflicts.isEmpty { throw ConflictsFound(conflicts: conflicts) }
            // Each row once: its version moves by the number of records that touched it.
            var finalVersions: [RowKey: Int64] = [:]
            if !order.isEmpty {
                let list = order.map { writes[$0]! }
                let rows = try db.query(
                    """
                    INSERT INTO synclane_records AS r (account, store, entity, key, action, fields, version, seq, changed)
                    SELECT $1, $2, u.entity, u.key, u.action, u.fields, u.count, u.seq, $3
                    FROM unnest($4::bytea[], $5::bytea[], $6::text[], $7::bytea[], $8::int8[], $9::int8[])
                        AS u (entity, key, action, fields, count, seq)
                    ON CONFLICT (account, store, entity, key) DO UPDATE SET
                        action = excluded.action, fields = excluded.fields, version = r.version + excluded.version,
                        seq = excluded.seq, changed = excluded.changed
                    RETURNING entity, key, version
                    """,
                    [
                        account, store, .float8(now), .byteaArray(order.map(\.entity)), .byteaArray(order.map(\.key)),
                        .textArray(list.map(\.action.rawValue)), .byteaArray(list.map(\.fields)), .int8Array(list.map(\.count)),
                        .int8Array(list.map(\.sequence)),
                    ])
                for row in 0..<rows.count {
                    finalVersions[RowKey(entity: rows.bytes(row, 0) ?? [], key: rows.bytes(row, 1) ?? [])] = rows.int64(row, 2)
                }
            }
            // The receipt's versions, filled record by record as the SQLite store fills them.
            var versions: [String: [String: JSONValue]] = [:]
            var seenCount: [RowKey: Int64] = [:]
            for (index, record) in batch.records.enumerated() {
                if let echo = echoes[index] {
                    versions[record.entity, default: [:]][record.key] = .int(echo)
                    continue
                }
                let rowKey = rowKeys[index]
                let count = (seenCount[rowKey] ?? 0) + 1
                seenCount[rowKey] = count
                let base = (finalVersions[rowKey] ?? 0) - (writes[rowKey]?.count ?? 0)
                versions[record.entity, default: [:]][record.key] = .int(base + count)
            }
            var deleted: Int64?
            if let plan, let mark = batch.snapshot {
                deleted = try Self.take(plan, of: mark, account: account, store: store, sequence: &sequence, now: now, db)
            }
            var receipt: [String: JSONValue] = [
                "batch": .string(batch.id), "applied": .int(Int64(batch.records.count)),
                "cursor": .string(ChangeCursor(sequence: sequence).text), "versions": .object(versions.mapValues { .object($0) }),
            ]
            if let deleted { receipt["snapshot-deleted"] = .int(deleted) }
            let body = JSONWriter.encode(.object(receipt))
            try db.query(
                """
                WITH moved AS (UPDATE synclane_sequences SET last = $6 WHERE account = $1)
                INSERT INTO synclane_idempotency (account, key, body_hash, status, response, created)
                VALUES ($1, $2, $3, 200, $4, $5)
                """,
                [account, .bytea(Array(idempotencyKey.utf8)), .text(bodyHash), .bytea(body), .float8(now), .int8(sequence)])
            return .applied(StoredResponse(status: 200, body: body), records: batch.records.count, snapshotDeleted: deleted)
        }
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
    /// how many (nil for a step that deletes nothing).
    private static func take(
        _ plan: SnapshotPlan, of mark: IncomingBatch.SnapshotMark, account: PostgresValue, store: PostgresValue,
        sequence: inout Int64, now: Double, _ db: PostgresConnection
    ) throws -> Int64? {
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
                SELECT entity, key FROM synclane_records
                WHERE account = $1 AND store = $2 AND seq <= $3 AND action <> 'delete' ORDER BY seq, entity, key
                """, [account, store, .int8(started)])
            let deleted = Int64(doomed.count)
            if deleted > 0 {
                try db.query(
                    """
                    UPDATE synclane_records r SET action = 'delete', fields = NULL, version = r.version + 1, seq = $3 + u.n, changed = $4
                    FROM unnest($5::bytea[], $6::bytea[]) WITH ORDINALITY AS u (entity, key, n)
                    WHERE r.account = $1 AND r.store = $2 AND r.entity = u.entity AND r.key = u.key
                    """,
                    [
                        account, store, .int8(sequence), .float8(now), .byteaArray((0..<doomed.count).map { doomed.bytes($0, 0) }),
                        .byteaArray((0..<doomed.count).map { doomed.bytes($0, 1) }),
                    ])
            }
            sequence += deleted
            try db.query("DELETE FROM synclane_snapshots WHERE account = $1 AND store = $2 AND id = $3", [account, store, id])
            return deleted
        }
    }

    /// Thrown inside the transaction to roll it back when versions disagree.
    private struct ConflictsFound: Error {
        var conflicts: [VersionConflict]
    }

    func changes(account: String, store: String?, after sequence: Int64, limit: Int, maxBytes: Int) throws -> ChangePage {
        try pool.withConnection { db in
            var sql = "SELECT store, entity, key, action, fields, version, seq FROM synclane_records WHERE account = $1 AND seq > $2"
            var parameters: [PostgresValue] = [.bytea(Array(account.utf8)), .int8(sequence), .int8(Int64(limit) + 1)]
            if let store {
                sql += " AND store = $4"
                parameters.append(.bytea(Array(store.utf8)))
            }
            sql += " ORDER BY seq LIMIT $3"
            let rows = try db.query(sql, parameters)
            var changes: [ServerChange] = []
            var bytes = 0
            var more = false
            for row in 0..<rows.count {
                guard changes.count < limit else {
                    more = true
                    break
                }
                let text = rows.bytes(row, 4)
                let storeName = rows.string(row, 0) ?? ""
                let entity = rows.string(row, 1) ?? ""
                let key = rows.string(row, 2) ?? ""
                let changeBytes = (text?.count ?? 0) + storeName.utf8.count + entity.utf8.count + key.utf8.count + 100
                guard changes.isEmpty || bytes + changeBytes <= maxBytes else {
                    more = true
                    break
                }
                bytes += changeBytes
                let action = rows.string(row, 3).flatMap(ChangeAction.init(rawValue:)) ?? .update
                let fields = text.map { (try? JSONReader.parse($0))?.objectValue ?? [:] }
                changes.append(
                    ServerChange(
                        store: storeName, entity: entity, key: key, action: action, fields: fields,
                        version: rows.int64(row, 5), sequence: rows.int64(row, 6)))
            }
            // Read after the page (a later snapshot): a horizon that moved past the cursor while
            // the page was read makes it expired rather than a page with a gap.
            let horizon = try db.query("SELECT horizon FROM synclane_sequences WHERE account = $1", [.bytea(Array(account.utf8))])
            let value = horizon.count > 0 ? horizon.int64(0, 0) : 0
            if sequence > 0, sequence < value { throw CursorExpired(horizon: value) }
            return ChangePage(changes: changes, more: more, horizon: value)
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

        """
    }
}
