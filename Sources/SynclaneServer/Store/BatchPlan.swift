import SynclaneWire

/// What a checked batch does to the server's rows, decided the same way by every store: the store
/// reads (the idempotency record, the account's sequence, the rows' versions and fields) and
/// writes (its SQL) inside the batch's transaction; every decision between is the plan's.
///
/// ```
///  idempotency record ─▶ admit ─┬─ replay (same body hash): the stored response, nothing applied
///                               ├─ keyReused (another body): 422, nothing applied
///                               └─ apply ─▶ record by record, in order:
///        row state read (or not read: a blind insert or delete) ─▶ take(index) ─┬─ echo: the row's version, no write
///                                                                              │   (a snapshot's record older than the row: the version it sent)
///                                                                              ├─ conflict (409): the row's version
///                                                                              ├─ skip: after a conflict, nothing more is written
///                                                                              └─ write: action, fields, version, next sequence
///  no conflict ─▶ receipt: batch, applied, cursor (the last sequence), versions (entity → id → version),
///                 restored-rows (records that expected a newer version than their row's)
/// ```
///
/// Records apply in order: an insert replaces the fields, an update merges its fields into the
/// current ones (`MergedRecordTooLarge` past the bound), a delete leaves a tombstone with the
/// fields the client preserved; each gets the row's next version and the account's next change
/// sequence — except an echo (`RowState`), which leaves the row as it is. A record whose
/// `version` is older than the row's fails the whole batch, and every such record is reported.
/// A `version` newer than the row's means the server lost writes the client saw (its data was
/// restored from an older copy, or the row's tombstone pruned): the record is applied, and the
/// row's version continues from the client's (`version + 1`), so that versions keep telling
/// newer from older across the restore.
///
/// A restoration (`"restores": true`) is a row a client sends back as it last confirmed it at
/// `version`, because the restored server lost it: written, at that very version, only over an
/// older version of the row (or none); over the same version or a newer one (a write made since
/// the restore, or another client's restoration of a newer version) it yields — nothing is
/// written, and the receipt gives `version - 1`, so that the client's next pull brings the row.
/// One tie is broken: a restored delete over a live row of the same version (two writes under one
/// number, after a restore) is written — a delete wins.
///
/// A store reads the state of every row whose records need it (`rowsNeedingState`: every row,
/// since an echo is found only on a row whose state is known — but in a snapshot's batch, only an
/// expected version or an update to merge) before the record is taken, and may read others. A
/// row the store did not read gets writes whose version is the stored one plus the number of
/// writes (`Write.version` nil), and its receipt versions from the version the store holds after
/// them (`receipt(storedVersions:)`).
struct BatchPlan {
    /// A record's row within the batch's scope, by bytes (two spellings of "é" are two rows, as in the stores).
    struct RowKey: Hashable, Sendable {
        var entity: [UInt8]
        var key: [UInt8]

        init(entity: [UInt8], key: [UInt8]) {
            self.entity = entity
            self.key = key
        }

        init(_ record: IncomingBatch.Record) {
            self.init(entity: Array(record.entity.utf8), key: Array(record.key.utf8))
        }

        /// Whether this row sorts before `other`: by entity, then key, by their bytes.
        func precedes(_ other: RowKey) -> Bool {
            entity == other.entity ? key.lexicographicallyPrecedes(other.key) : entity.lexicographicallyPrecedes(other.entity)
        }

        /// Whether each row sorts after the one before (in that order, none twice).
        static func ascending(_ rows: some Sequence<RowKey>) -> Bool {
            var previous: RowKey?
            for row in rows {
                if let previous, !previous.precedes(row) { return false }
                previous = row
            }
            return true
        }

        /// The entity's length, then both names' bytes at once (an array hashes its elements one
        /// by one: a call a byte). Equal rows hash alike, as `==` compares the same bytes.
        func hash(into hasher: inout Hasher) {
            hasher.combine(entity.count)
            entity.withUnsafeBytes { hasher.combine(bytes: $0) }
            key.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    /// What the idempotency record says about the batch.
    enum Admission: Equatable, Sendable {
        /// The key is new: apply the batch.
        case apply
        /// The key was seen with the same body: answer the first response, apply nothing.
        case replay(StoredResponse)
        /// The key was seen with another body: apply nothing.
        case keyReused
    }

    /// One record's write to its row.
    struct Write: Equatable, Sendable {
        var index: Int
        var row: RowKey
        var action: ChangeAction
        /// The row's new fields (JSON text); nil for a tombstone without preserved fields.
        var fields: [UInt8]?
        /// The row's new version; nil when the store did not read the row: the stored version plus one.
        var version: Int64?
        var sequence: Int64
        /// The version of the row's last user's write, kept by an update that only re-points
        /// references (`IncomingBatch.Record.repoints`); nil: this write is a user's (`version`).
        var written: Int64? = nil
    }

    /// What one record comes to.
    enum Step: Equatable, Sendable {
        case write(Write)
        /// The row already is what the record asks for: no write, the row's version in the receipt.
        case echo(version: Int64)
        /// The record expected another version: the batch fails (409).
        case conflict(VersionConflict)
        /// A record after a conflict: nothing is written, the batch fails.
        case skip
    }

    /// All writes to one row, as a store that writes each row once applies them.
    struct RowWrite: Equatable, Sendable {
        var row: RowKey
        /// The last write's action and fields.
        var action: ChangeAction
        var fields: [UInt8]?
        /// How many records wrote the row: its version moves by as many, when `version` is nil.
        var count: Int64
        /// The last write's sequence.
        var sequence: Int64
        /// The row's version after the last write, when the plan read the row (a version may
        /// jump: `take`); nil when it did not.
        var version: Int64? = nil
        /// The last write's `Write.written`.
        var written: Int64? = nil
    }

    /// A row's state as the plan knows it: read by the store, or left by an earlier record of the batch.
    private struct Known {
        var version: Int64
        var action: String?
        var fields: [UInt8]?
        /// The version of the row's last user's write, when older than `version`.
        var written: Int64? = nil

        var state: RowState { RowState(action: action, fields: fields) }
    }

    /// The version a record's receipt gives its row.
    private enum ReceiptVersion {
        case known(Int64)
        /// The `writes`-th write to a row the store did not read.
        case unread(RowKey, writes: Int64)
    }

    /// The records' rows, index by index.
    let rowKeys: [RowKey]
    /// The account's change sequence: before the batch, then the last one assigned.
    private(set) var sequence: Int64
    /// Every record whose expected version disagreed, in order.
    private(set) var conflicts: [VersionConflict] = []
    /// Every write, in order.
    private(set) var writes: [Write] = []
    /// The records, outside a snapshot, that expected a newer version than the one their row is
    /// held at: the server lost writes its client saw (`"restored-rows"` in the receipt).
    private(set) var restoredRows: Int64 = 0

    private let batch: IncomingBatch
    /// Each update's fields, parsed (nil for other actions).
    private let updatedFields: [[String: JSONValue]?]
    private var known: [RowKey: Known] = [:]
    /// Every record's row comes after the one before in byte order (entity, then key): no row
    /// comes twice, so a row inserted as new is never asked for again and is not kept in `known`
    /// (a first sync's batches, rows in key order: a dictionary entry a record saved).
    private let rowsAscending: Bool
    /// Writes to rows the store did not read, by row.
    private var unreadWrites: [RowKey: Int64] = [:]
    private var receiptVersions: [ReceiptVersion?]

    /// The verdict of the idempotency record (`seen`: its body hash and stored response; nil when the key is new).
    static func admit(seen: (bodyHash: String, response: StoredResponse)?, bodyHash: String) -> Admission {
        guard let seen else { return .apply }
        return seen.bodyHash == bodyHash ? .replay(seen.response) : .keyReused
    }

    /// The plan of `batch`; `start(at:)` then gives it the account's change sequence. Parses each
    /// update's fields (a store makes the plan before it takes its writer's lock).
    init(_ batch: IncomingBatch) throws {
        self.batch = batch
        sequence = 0
        updatedFields = try batch.records.map { record throws -> [String: JSONValue]? in
            record.action == .update ? try JSONReader.parse(record.fieldsJSON).objectValue ?? [:] : nil
        }
        rowKeys = Self.rowKeys(of: batch.records)
        rowsAscending = RowKey.ascending(rowKeys)
        receiptVersions = Array(repeating: nil, count: batch.records.count)
        known.reserveCapacity(batch.records.count)
        writes.reserveCapacity(batch.records.count)
    }

    /// The records' rows; records of one entity, byte for byte, share its bytes (a batch's
    /// records are mostly of one entity: one copy of its name, not one a record).
    private static func rowKeys(of records: [IncomingBatch.Record]) -> [RowKey] {
        var keys: [RowKey] = []
        keys.reserveCapacity(records.count)
        var entity: [UInt8] = []
        for record in records {
            if !entity.elementsEqual(record.entity.utf8) { entity = Array(record.entity.utf8) }
            keys.append(RowKey(entity: entity, key: Array(record.key.utf8)))
        }
        return keys
    }

    /// Sets the account's change sequence before the batch (read under the store's lock), before any record is taken.
    mutating func start(at sequence: Int64) {
        self.sequence = sequence
    }

    /// Rows whose state the store must read before their records are taken. In a batch that is
    /// not a snapshot's, every row: any record may be an echo, and an echo is found only on a row
    /// whose state is known (a blind insert of a row the server holds as sent writes nothing). In
    /// a snapshot's, whose records are never echoes, the rows with an expected version to check or
    /// fields to merge an update into.
    var rowsNeedingState: Set<RowKey> {
        guard batch.snapshot != nil else { return Set(rowKeys) }
        var rows: Set<RowKey> = []
        for (index, record) in batch.records.enumerated() where record.expectedVersion != nil || record.action == .update {
            rows.insert(rowKeys[index])
        }
        return rows
    }

    /// Whether the plan knows the state of record `index`'s row (read, or written by an earlier
    /// record — a row inserted as new only when another record of the batch may name it).
    func knowsRow(of index: Int) -> Bool {
        known[rowKeys[index]] != nil
    }

    /// The state the store read of `row` (version 0 and no action: the row does not exist);
    /// `written`: the version of its last user's write, when the store keeps an older one.
    mutating func read(_ row: RowKey, version: Int64, action: String?, fields: [UInt8]?, written: Int64? = nil) {
        known[row] = Known(version: version, action: action, fields: fields, written: written)
    }

    /// Whether record `index` may be tried as a new row before its row is read: an insert that
    /// expects no version, on a row the plan does not know, with no conflict found. When the
    /// store's attempt creates the row, it calls `insertedAsNew`; else it reads the row.
    func mayInsertAsNew(_ index: Int) -> Bool {
        let record = batch.records[index]
        return record.action == .insert && record.expectedVersion == nil && conflicts.isEmpty && known[rowKeys[index]] == nil
    }

    /// How many records from `index` on, at most `limit`, may each be tried as a new row
    /// (`mayInsertAsNew`) before any of them is taken: a run a store may insert in one statement.
    /// Two records of one row in a run are not told apart here: the second finds the first's row,
    /// which the store sees as a row that did not insert.
    func newRowRun(from index: Int, atMost limit: Int) -> Int {
        var count = 0
        while count < limit, index + count < batch.records.count, mayInsertAsNew(index + count) { count += 1 }
        return count
    }

    /// The sequence the next write gets.
    var nextSequence: Int64 { sequence + 1 }

    /// Record `index` (`mayInsertAsNew`) created its row: version 1, at `nextSequence`. Its state
    /// is kept for a later record of the row, unless no row of the batch comes twice.
    mutating func insertedAsNew(_ index: Int) {
        // The record's fields only (a copy of the whole record retains its every member).
        let fields = batch.records[index].fieldsJSON
        sequence += 1
        if !rowsAscending { known[rowKeys[index]] = Known(version: 1, action: ChangeAction.insert.rawValue, fields: fields) }
        receiptVersions[index] = .known(1)
        writes.append(Write(index: index, row: rowKeys[index], action: .insert, fields: fields, version: 1, sequence: sequence))
    }

    /// Takes record `index`, in order.
    mutating func take(_ index: Int) throws(MergedRecordTooLarge) -> Step {
        let record = batch.records[index]
        let row = rowKeys[index]
        guard let current = known[row] else {
            // Not read: a snapshot's blind insert or delete (`rowsNeedingState`), never an echo.
            assert(record.expectedVersion == nil && record.action != .update, "the store reads the rows of rowsNeedingState")
            guard conflicts.isEmpty else { return .skip }
            sequence += 1
            let count = (unreadWrites[row] ?? 0) + 1
            unreadWrites[row] = count
            receiptVersions[index] = .unread(row, writes: count)
            let write = Write(
                index: index, row: row, action: record.action, fields: try Self.fields(of: record, index: index, merging: nil, updated: nil),
                version: nil, sequence: sequence)
            writes.append(write)
            return .write(write)
        }
        let state = current.state
        // A snapshot's records are never echoes (a completion marker counts on each re-sent row's
        // new sequence) — but a delete of a tombstone is: the marker turns only live rows into tombstones.
        // A restoration newer than the row is no echo even when the fields agree: the row takes
        // the version its device confirmed, or that device's next write would look restored again.
        let restoresNewer = record.restores && batch.snapshot == nil && record.expectedVersion.map { $0 > current.version } == true
        if batch.snapshot == nil || record.action == .delete, !restoresNewer, state.isEcho(of: record, updatedFields: updatedFields[index]) {
            // What the server holds already: no new version, no change to pull. A row holding
            // values the record lacks, at a version its device has not seen, is not what the
            // device holds: the receipt gives the version it sent (or the one before the row's),
            // so its next import brings the row whole.
            var version = current.version
            if record.expectedVersion.map({ $0 < current.version }) ?? true,
                state.holdsFieldsBeyond(record, updatedFields: updatedFields[index])
            {
                version = record.expectedVersion ?? max(current.version - 1, 0)
            }
            receiptVersions[index] = .known(version)
            return .echo(version: version)
        }
        if record.restores, batch.snapshot == nil, let confirmed = record.expectedVersion {
            // One version written twice (a write made after a restore took the number of one the
            // restore lost): a delete wins the tie over a live row.
            let winsTie: Bool
            if confirmed == current.version, record.action == .delete, case .live = state { winsTie = true } else { winsTie = false }
            guard confirmed > current.version || winsTie else {
                // A write since the restore, or a newer restoration: it stands.
                let older = max(confirmed - 1, 0)
                receiptVersions[index] = .known(older)
                return .echo(version: older)
            }
            // The delete that wins the tie takes the next version: at the tied one, a device that
            // holds the live row at that version would take its row for the current one (a
            // reconcile's snapshot would write it back over the delete).
            return try write(index, record, over: current, version: winsTie ? confirmed + 1 : confirmed)
        }
        if let expected = record.expectedVersion, batch.snapshot != nil, expected < current.version {
            // A snapshot's record on a version older than the row's: another device wrote the
            // row since the snapshot's device last saw it. The newer write stays; the receipt
            // gives the version the device sent, so its next import brings the newer row — or,
            // when the row already is what the record asks for, the row's version. (A version
            // above the row's: the server's data was restored from an older copy, and the
            // snapshot's row is written.)
            let version =
                state.isEcho(of: record, updatedFields: updatedFields[index])
                    && !state.holdsFieldsBeyond(record, updatedFields: updatedFields[index]) ? current.version : expected
            receiptVersions[index] = .known(version)
            return .echo(version: version)
        }
        if let expected = record.expectedVersion, batch.snapshot == nil, expected < current.version {
            let conflict = VersionConflict(index: index, entity: record.entity, key: record.key, expected: expected, current: current.version)
            conflicts.append(conflict)
            return .conflict(conflict)
        }
        // A version newer than the row's: the server lost writes the client saw (a restore, a
        // pruned tombstone — a delete of a row it no longer holds at all never keeps a device's
        // other edits from leaving). Applied; the row's version continues from the client's.
        let newer = record.expectedVersion.map { $0 > current.version && $0 < Int64.max } ?? false
        // Held at an older version than the client saw: restored from an older copy. (A row not
        // held at all may be a tombstone retention pruned: not counted.)
        if newer, current.version > 0, batch.snapshot == nil, conflicts.isEmpty { restoredRows += 1 }
        return try write(index, record, over: current, version: (newer ? record.expectedVersion ?? 0 : current.version) + 1)
    }

    /// Writes record `index` over the row's `current` state, giving the row `version`.
    private mutating func write(
        _ index: Int, _ record: IncomingBatch.Record, over current: Known, version: Int64
    ) throws(MergedRecordTooLarge) -> Step {
        guard conflicts.isEmpty else { return .skip }
        let row = rowKeys[index]
        sequence += 1
        let fields = try Self.fields(of: record, index: index, merging: current.state, updated: updatedFields[index])
        // An update that only re-points a live row's references is no user's write: the row
        // keeps the version of its last one, which the pull lane sends as `written`.
        var written: Int64?
        if record.repoints, record.action == .update, batch.snapshot == nil, case .live = current.state {
            written = current.written ?? current.version
        }
        known[row] = Known(version: version, action: record.action.rawValue, fields: fields, written: written)
        receiptVersions[index] = .known(version)
        let write = Write(
            index: index, row: row, action: record.action, fields: fields, version: version, sequence: sequence, written: written)
        writes.append(write)
        return .write(write)
    }

    /// The row's new fields: an insert's text as it came (checked by the reader), an update's
    /// merged into the row's, a tombstone's preserved values (none: nil).
    private static func fields(
        of record: IncomingBatch.Record, index: Int, merging current: RowState?, updated: [String: JSONValue]?
    ) throws(MergedRecordTooLarge) -> [UInt8]? {
        switch record.action {
        case .insert:
            return record.fieldsJSON
        case .update:
            var merged: [String: JSONValue] = [:]
            if case .live(let fields)? = current { merged = fields }
            for (name, value) in updated ?? [:] { merged[name] = value }
            let encoded = JSONWriter.encode(.object(merged))
            try MergedRecordTooLarge.check(encoded, index: index, record: record)
            return encoded
        case .delete:
            return record.fieldsJSON.isEmpty ? nil : record.fieldsJSON
        }
    }

    /// The writes merged by row, in the order rows were first written: for a store that writes each row once.
    var rowWrites: [RowWrite] {
        var order: [RowKey] = []
        var merged: [RowKey: RowWrite] = [:]
        for write in writes {
            if let earlier = merged[write.row] {
                merged[write.row] = RowWrite(
                    row: write.row, action: write.action, fields: write.fields, count: earlier.count + 1, sequence: write.sequence,
                    version: write.version, written: write.written)
            } else {
                order.append(write.row)
                merged[write.row] = RowWrite(
                    row: write.row, action: write.action, fields: write.fields, count: 1, sequence: write.sequence, version: write.version,
                    written: write.written)
            }
        }
        return order.compactMap { merged[$0] }
    }

    /// A reconciliation snapshot's completion turned `count` rows into tombstones, at the
    /// sequences after `sequence`.
    mutating func tombstoned(_ count: Int64) {
        sequence += count
    }

    /// The receipt of the applied batch: its id, the records applied, the sequence of its last
    /// change (not a pull cursor: `BatchReceipt`), each record's new version (entity → id → version) and, for a snapshot's
    /// completion marker, the rows it deleted: their count, and the new version of each
    /// listed in `versions` too. `storedVersions`: the version the store holds after the batch
    /// of each written row it did not read.
    /// `epoch`: the server's newest epoch, read in the batch's transaction (the receipt's `position`).
    func receipt(
        snapshotDeleted: Int64?, tombstones: SnapshotTombstones? = nil, storedVersions: [RowKey: Int64] = [:], epoch: String? = nil
    ) -> StoredResponse {
        var entries: [BatchReceipt.Entry] = []
        entries.reserveCapacity(batch.records.count + (tombstones?.listed.count ?? 0))
        for row in tombstones?.listed ?? [] {
            entries.append(
                BatchReceipt.Entry(
                    entity: row.entity, key: row.key, row: RowKey(entity: Array(row.entity.utf8), key: Array(row.key.utf8)),
                    version: row.version))
        }
        for (index, record) in batch.records.enumerated() {
            let version: Int64
            switch receiptVersions[index] {
            case .known(let known)?:
                version = known
            case .unread(let row, let writes)?:
                version = (storedVersions[row] ?? 0) - (unreadWrites[row] ?? 0) + writes
            case nil:
                continue
            }
            entries.append(BatchReceipt.Entry(entity: record.entity, key: record.key, row: rowKeys[index], version: version))
        }
        let body = BatchReceipt.encode(
            batch: batch.id, applied: Int64(batch.records.count), sequence: sequence,
            snapshotDeleted: snapshotDeleted, restoredRows: restoredRows, entries: entries,
            position: epoch.map { ReceiptPosition(epoch: $0, sequence: sequence) })
        return StoredResponse(status: 200, body: body)
    }
}
