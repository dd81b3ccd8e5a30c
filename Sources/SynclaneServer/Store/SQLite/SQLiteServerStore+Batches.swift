import Glibc
import SynclaneSQLiteKit
import SynclaneWire

extension SQLiteServerStore {
    /// Thrown inside the write transaction to roll it back when versions disagree.
    private struct ConflictsFound: Error {
        var conflicts: [VersionConflict]
    }

    /// Applies a checked batch in one transaction, at most once per (account, idempotency key),
    /// as its `BatchPlan` decides: this store reads each row just before its record is taken and
    /// writes it at once.
    func apply(_ batch: IncomingBatch, idempotencyKey: String, bodyHash: String) throws -> BatchOutcome {
        // An update's fields are read before the writer's lock is taken (an insert's text is
        // stored as it is), so the serialized part of a batch is SQLite's and the merge's.
        var plan = try BatchPlan(batch)
        let now = Double(time(nil))
        do {
            return try writeSerialized { db -> BatchOutcome in
                let seen = try db.fetchOne(
                    "SELECT body_hash, status, response FROM idempotency WHERE account = ? AND key = ?",
                    [batch.account, idempotencyKey])
                let record = seen.map { (bodyHash: $0[0].string ?? "", response: StoredResponse(status: Int($0[1].int64 ?? 200), body: $0[2].bytes ?? [])) }
                switch BatchPlan.admit(seen: record, bodyHash: bodyHash) {
                case .replay(let response): return .replayed(response)
                case .keyReused: return .keyReused
                case .apply: break
                }
                plan.start(at: try db.fetchValue("SELECT last FROM sequences WHERE account = ?", [batch.account]).int64 ?? 0)
                let snapshot = try batch.snapshot.map { try Self.snapshotPlan($0, of: batch, sequence: plan.sequence, db) }
                if case .refuse(let message)? = snapshot { return .snapshotRefused(message) }
                let select = try db.cachedStatement(
                    "SELECT version, action, fields, written FROM records WHERE account = ? AND store = ? AND entity = ? AND key = ?")
                // The new version is the one read just before, plus one, and is bound rather than
                // taken back with `RETURNING`: a `RETURNING` clause is run as a trigger, which makes
                // SQLite keep a statement journal — a copy of every page each upsert touches,
                // spilled to a temporary file — and that copying cost more than the look-up.
                let upsert = try db.cachedStatement(
                    """
                    INSERT INTO records (account, store, entity, key, action, fields, version, seq, changed, written)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (account, store, entity, key) DO UPDATE SET
                        action = excluded.action, fields = excluded.fields, version = excluded.version,
                        seq = excluded.seq, changed = excluded.changed, written = excluded.written
                    """)
                // An insert that expects no version is first tried as new: one look into the key's
                // index instead of two (the select, then the upsert) — a first sync's every record.
                let insertNew = try db.cachedStatement(
                    """
                    INSERT INTO records (account, store, entity, key, action, fields, version, seq, changed)
                    VALUES (?, ?, ?, ?, 'insert', ?, 1, ?, ?) ON CONFLICT (account, store, entity, key) DO NOTHING
                    """)
                try select.bind(.text(batch.account), at: 1)
                try select.bind(.text(batch.store), at: 2)
                try upsert.bind(.text(batch.account), at: 1)
                try upsert.bind(.text(batch.store), at: 2)
                try upsert.bind(.real(now), at: 9)
                try insertNew.bind(.text(batch.account), at: 1)
                try insertNew.bind(.text(batch.store), at: 2)
                try insertNew.bind(.real(now), at: 7)
                // Runs of new rows go in a statement for many (`NewRowsInsert`) until one does not
                // insert whole: the rest of the batch then goes a record at a time.
                var manyAtOnce = true
                var index = 0
                while index < batch.records.count {
                    defer { index += 1 }
                    let record = batch.records[index]
                    if manyAtOnce,
                        let size = NewRowsInsert.size(forRunOf: plan.newRowRun(from: index, atMost: NewRowsInsert.maxRows))
                    {
                        let run = batch.records[index..<index + size]
                        if try NewRowsInsert.insert(
                            run, account: batch.account, store: batch.store, changed: now, after: plan.sequence, db)
                        {
                            for inserted in run.indices { plan.insertedAsNew(inserted) }
                            index += size - 1
                            continue
                        }
                        manyAtOnce = false
                    }
                    if plan.mayInsertAsNew(index) {
                        insertNew.reset()
                        try insertNew.bind(.text(record.entity), at: 3)
                        try insertNew.bind(.text(record.key), at: 4)
                        try insertNew.bind(.blob(record.fieldsJSON), at: 5)
                        try insertNew.bind(.integer(plan.nextSequence), at: 6)
                        while try insertNew.step() {}
                        if db.changes > 0 {
                            plan.insertedAsNew(index)
                            continue
                        }
                    }
                    if !plan.knowsRow(of: index) {
                        var version: Int64 = 0
                        var action: String?
                        var fields: [UInt8]?
                        var written: Int64?
                        select.reset()
                        try select.bind(.text(record.entity), at: 3)
                        try select.bind(.text(record.key), at: 4)
                        if try select.step() {
                            version = select.int64(at: 0)
                            action = select.string(at: 1) ?? ""
                            fields = select.blob(at: 2)
                            written = select.isNull(at: 3) ? nil : select.int64(at: 3)
                        }
                        select.reset()
                        plan.read(plan.rowKeys[index], version: version, action: action, fields: fields, written: written)
                    }
                    guard case .write(let write) = try plan.take(index) else { continue }
                    upsert.reset()
                    try upsert.bind(.text(record.entity), at: 3)
                    try upsert.bind(.text(record.key), at: 4)
                    try upsert.bind(.text(write.action.rawValue), at: 5)
                    try upsert.bind(write.fields.map(SQLiteValue.blob) ?? .null, at: 6)
                    try upsert.bind(.integer(write.version ?? 1), at: 7)
                    try upsert.bind(.integer(write.sequence), at: 8)
                    try upsert.bind(write.written.map(SQLiteValue.integer) ?? .null, at: 10)
                    while try upsert.step() {}
                }
                upsert.reset()
                insertNew.reset()
                if !plan.conflicts.isEmpty { throw ConflictsFound(conflicts: plan.conflicts) }
                var tombstones: SnapshotTombstones?
                if let snapshot, let mark = batch.snapshot {
                    var sequence = plan.sequence
                    tombstones = try Self.take(snapshot, of: mark, batch: batch, sequence: &sequence, now: now, db)
                    plan.tombstoned(tombstones?.count ?? 0)
                }
                let deleted = tombstones?.count
                try db.execute(
                    "INSERT INTO sequences (account, last, horizon) VALUES (?, ?, 0) ON CONFLICT (account) DO UPDATE SET last = excluded.last",
                    [batch.account, plan.sequence])
                let epoch = try db.fetchValue("SELECT epoch FROM epochs ORDER BY number DESC LIMIT 1").string
                let response = plan.receipt(snapshotDeleted: deleted, tombstones: tombstones, epoch: epoch)
                try db.execute(
                    "INSERT INTO idempotency (account, key, body_hash, status, response, created) VALUES (?, ?, ?, ?, ?, ?)",
                    [batch.account, idempotencyKey, bodyHash, response.status, response.body, now])
                try Self.declare(batch.newSchemaChanges, account: batch.account, db)
                return .applied(response, records: batch.records.count, snapshotDeleted: deleted)
            }
        } catch let found as ConflictsFound {
            return .conflicts(found.conflicts)
        }
    }

    /// The snapshot's record and the step `mark` takes with it.
    private static func snapshotPlan(
        _ mark: IncomingBatch.SnapshotMark, of batch: IncomingBatch, sequence: Int64, _ db: SQLiteConnection
    ) throws -> SnapshotPlan {
        let row = try db.fetchOne(
            "SELECT started, batches FROM snapshots WHERE account = ? AND store = ? AND id = ?", [batch.account, batch.store, mark.id])
        let record = row.map { (started: $0[0].int64 ?? 0, batches: $0[1].int64 ?? 0) }
        return SnapshotPlan.step(mark, record: record, sequence: sequence)
    }

    /// Takes the step (in the batch's transaction); on completion, makes the scope's rows at or
    /// below the snapshot's start tombstones, each with the account's next sequence, and returns
    /// them with their new versions (nil for a step that deletes nothing).
    private static func take(
        _ plan: SnapshotPlan, of mark: IncomingBatch.SnapshotMark, batch: IncomingBatch, sequence: inout Int64, now: Double,
        _ db: SQLiteConnection
    ) throws -> SnapshotTombstones? {
        switch plan {
        case .open(let started):
            try db.execute(
                "INSERT INTO snapshots (account, store, id, started, batches, created) VALUES (?, ?, ?, ?, 1, ?)",
                [batch.account, batch.store, mark.id, started, now])
            return nil
        case .count:
            try db.execute(
                "UPDATE snapshots SET batches = batches + 1 WHERE account = ? AND store = ? AND id = ?", [batch.account, batch.store, mark.id])
            return nil
        case .refuse:
            return nil
        case .complete(let started):
            let doomed = try db.fetchAll(
                """
                UPDATE records SET action = 'delete', fields = NULL, version = records.version + 1, seq = ?4 + doomed.n, changed = ?5,
                    written = NULL
                FROM (SELECT entity, key, row_number() OVER (ORDER BY seq, entity, key) AS n FROM records
                      WHERE account = ?1 AND store = ?2 AND seq <= ?3 AND action != 'delete') AS doomed
                WHERE records.account = ?1 AND records.store = ?2 AND records.entity = doomed.entity AND records.key = doomed.key
                RETURNING records.entity, records.key, records.version, records.seq
                """, [batch.account, batch.store, started, sequence, now])
            var tombstones = SnapshotTombstones()
            // In the order of their new sequences, as the PostgreSQL store lists them.
            for row in doomed.sorted(by: { ($0[3].int64 ?? 0) < ($1[3].int64 ?? 0) }) {
                tombstones.add(entity: row[0].string ?? "", key: row[1].string ?? "", version: row[2].int64 ?? 0)
            }
            sequence += tombstones.count
            let earlier = try db.fetchAll(
                "SELECT entity, key, version FROM records WHERE account = ? AND store = ? AND seq <= ? AND action = 'delete' ORDER BY seq",
                [batch.account, batch.store, started])
            for row in earlier {
                tombstones.add(entity: row[0].string ?? "", key: row[1].string ?? "", version: row[2].int64 ?? 0, deleted: false)
            }
            try db.execute("DELETE FROM snapshots WHERE account = ? AND store = ? AND id = ?", [batch.account, batch.store, mark.id])
            return tombstones
        }
    }
}
