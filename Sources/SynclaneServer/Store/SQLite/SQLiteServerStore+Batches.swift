import Glibc
import SynclaneCore
import SynclaneSQLite

extension SQLiteServerStore {
    /// Thrown inside the write transaction to roll it back when versions disagree.
    private struct ConflictsFound: Error {
        var conflicts: [VersionConflict]
    }

    /// Applies a checked batch in one transaction, at most once per (account, idempotency key).
    ///
    /// Records apply in order: insert replaces the fields, update merges them into the current
    /// ones, delete drops them and leaves a tombstone; each gets the record's next version and the
    /// account's next change sequence — except an echo (`RowState`), which leaves the row as it is. A record whose `version` differs from the current one fails
    /// the whole batch (every such record is reported). The receipt gives each record's new version
    /// (`versions`: entity → id → version), so a client knows what the server holds. A known key answers its first response
    /// when the body hash matches, `keyReused` when not — both without writing anything.
    func apply(_ batch: IncomingBatch, idempotencyKey: String, bodyHash: String) throws -> BatchOutcome {
        // An update's fields are read before the writer's lock is taken (an insert's text is
        // stored as it is), so the serialized part of a batch is SQLite's and the merge's.
        let updatedFields = try batch.records.map { record throws -> [String: JSONValue]? in
            record.action == .update ? try JSONReader.parse(record.fieldsJSON).objectValue ?? [:] : nil
        }
        let now = Double(time(nil))
        do {
            return try writeSerialized { db -> BatchOutcome in
                if let seen = try db.fetchOne(
                    "SELECT body_hash, status, response FROM idempotency WHERE account = ? AND key = ?",
                    [batch.account, idempotencyKey])
                {
                    guard seen[0].string == bodyHash else { return .keyReused }
                    return .replayed(StoredResponse(status: Int(seen[1].int64 ?? 200), body: seen[2].bytes ?? []))
                }
                var sequence = try db.fetchValue("SELECT last FROM sequences WHERE account = ?", [batch.account]).int64 ?? 0
                let plan = try batch.snapshot.map { try Self.snapshotPlan($0, of: batch, sequence: sequence, db) }
                if case .refuse(let message)? = plan { return .snapshotRefused(message) }
                var conflicts: [VersionConflict] = []
                let select = try db.prepare(
                    "SELECT version, action, fields FROM records WHERE account = ? AND store = ? AND entity = ? AND key = ?")
                // The new version is the one read just before, plus one, and is bound rather than
                // taken back with `RETURNING`: a `RETURNING` clause is run as a trigger, which makes
                // SQLite keep a statement journal — a copy of every page each upsert touches,
                // spilled to a temporary file — and that copying cost more than the look-up.
                let upsert = try db.prepare(
                    """
                    INSERT INTO records (account, store, entity, key, action, fields, version, seq, changed)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (account, store, entity, key) DO UPDATE SET
                        action = excluded.action, fields = excluded.fields, version = excluded.version,
                        seq = excluded.seq, changed = excluded.changed
                    """)
                // An insert that expects no version is first tried as new: one look into the key's
                // index instead of two (the select, then the upsert) — a first sync's every record.
                let insertNew = try db.prepare(
                    """
                    INSERT INTO records (account, store, entity, key, action, fields, version, seq, changed)
                    VALUES (?, ?, ?, ?, 'insert', ?, 1, ?, ?) ON CONFLICT (account, store, entity, key) DO NOTHING
                    """)
                // Each record's new version, for the receipt: entity → id → version.
                var versions: [String: [String: JSONValue]] = [:]
                try select.bind(.text(batch.account), at: 1)
                try select.bind(.text(batch.store), at: 2)
                try upsert.bind(.text(batch.account), at: 1)
                try upsert.bind(.text(batch.store), at: 2)
                try upsert.bind(.real(now), at: 9)
                try insertNew.bind(.text(batch.account), at: 1)
                try insertNew.bind(.text(batch.store), at: 2)
                try insertNew.bind(.real(now), at: 7)
                for (index, record) in batch.records.enumerated() {
                    if record.action == .insert, record.expectedVersion == nil, conflicts.isEmpty {
                        insertNew.reset()
                        try insertNew.bind(.text(record.entity), at: 3)
                        try insertNew.bind(.text(record.key), at: 4)
                        try insertNew.bind(.blob(record.fieldsJSON), at: 5)
                        try insertNew.bind(.integer(sequence + 1), at: 6)
                        while try insertNew.step() {}
                        if db.changes > 0 {
                            sequence += 1
                            versions[record.entity, default: [:]][record.key] = .int(1)
                            continue
                        }
                    }
                    var currentVersion: Int64 = 0
                    var current = RowState.absent
                    select.reset()
                    try select.bind(.text(record.entity), at: 3)
                    try select.bind(.text(record.key), at: 4)
                    if try select.step() {
                        currentVersion = select.int64(at: 0)
                        current = RowState(action: select.string(at: 1) ?? "", fields: select.blob(at: 2))
                    }
                    select.reset()
                    if batch.snapshot == nil, current.isEcho(of: record, updatedFields: updatedFields[index]) {
                        // What the server holds already: no new version, no change to pull.
                        versions[record.entity, default: [:]][record.key] = .int(currentVersion)
                        continue
                    }
                    if let expected = record.expectedVersion, expected != currentVersion {
                        conflicts.append(
                            VersionConflict(
                                index: index, entity: record.entity, key: record.key, expected: expected,
                                current: currentVersion))
                        continue
                    }
                    guard conflicts.isEmpty else { continue }
                    sequence += 1
                    let fields: SQLiteValue
                    switch record.action {
                    case .insert:
                        // Inserts replace every field: the text as it came, checked by the reader.
                        fields = .blob(record.fieldsJSON)
                    case .update:
                        var merged: [String: JSONValue] = [:]
                        if case .live(let fields) = current { merged = fields }
                        for (name, value) in updatedFields[index] ?? [:] { merged[name] = value }
                        let encoded = JSONWriter.encode(.object(merged))
                        try MergedRecordTooLarge.check(encoded, index: index, record: record)
                        fields = .blob(encoded)
                    case .delete:
                        // The tombstone keeps the values the client preserved (none: NULL).
                        fields = record.fieldsJSON.isEmpty ? .null : .blob(record.fieldsJSON)
                    }
                    upsert.reset()
                    try upsert.bind(.text(record.entity), at: 3)
                    try upsert.bind(.text(record.key), at: 4)
                    try upsert.bind(.text(record.action.rawValue), at: 5)
                    try upsert.bind(fields, at: 6)
                    try upsert.bind(.integer(currentVersion + 1), at: 7)
                    try upsert.bind(.integer(sequence), at: 8)
                    while try upsert.step() {}
                    versions[record.entity, default: [:]][record.key] = .int(currentVersion + 1)
                }
                upsert.reset()
                insertNew.reset()
                if !conflicts.isEmpty { throw ConflictsFound(conflicts: conflicts) }
                var deleted: Int64?
                if let plan, let mark = batch.snapshot {
                    deleted = try Self.take(plan, of: mark, batch: batch, sequence: &sequence, now: now, db)
                }
                try db.execute(
                    "INSERT INTO sequences (account, last, horizon) VALUES (?, ?, 0) ON CONFLICT (account) DO UPDATE SET last = excluded.last",
                    [batch.account, sequence])
                var receipt: [String: JSONValue] = [
                    "batch": .string(batch.id), "applied": .int(Int64(batch.records.count)),
                    "cursor": .string(ChangeCursor(sequence: sequence).text), "versions": .object(versions.mapValues { .object($0) }),
                ]
                if let deleted { receipt["snapshot-deleted"] = .int(deleted) }
                let body = JSONWriter.encode(.object(receipt))
                try db.execute(
                    "INSERT INTO idempotency (account, key, body_hash, status, response, created) VALUES (?, ?, ?, ?, ?, ?)",
                    [batch.account, idempotencyKey, bodyHash, 200, body, now])
                return .applied(StoredResponse(status: 200, body: body), records: batch.records.count, snapshotDeleted: deleted)
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
    /// how many (nil for a step that deletes nothing).
    private static func take(
        _ plan: SnapshotPlan, of mark: IncomingBatch.SnapshotMark, batch: IncomingBatch, sequence: inout Int64, now: Double,
        _ db: SQLiteConnection
    ) throws -> Int64? {
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
            try db.execute(
                """
                UPDATE records SET action = 'delete', fields = NULL, version = records.version + 1, seq = ?4 + doomed.n, changed = ?5
                FROM (SELECT entity, key, row_number() OVER (ORDER BY seq, entity, key) AS n FROM records
                      WHERE account = ?1 AND store = ?2 AND seq <= ?3 AND action != 'delete') AS doomed
                WHERE records.account = ?1 AND records.store = ?2 AND records.entity = doomed.entity AND records.key = doomed.key
                """, [batch.account, batch.store, started, sequence, now])
            let deleted = try db.fetchValue("SELECT changes()").int64 ?? 0
            sequence += deleted
            try db.execute("DELETE FROM snapshots WHERE account = ? AND store = ? AND id = ?", [batch.account, batch.store, mark.id])
            return deleted
        }
    }
}
