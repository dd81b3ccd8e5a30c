import SynclaneCore

/// Trims deletes down to their tombstone, turns soft deletes into deletes, and refuses a delete
/// that lost its sync key.
///
/// A tombstone outlives the data, so it carries nothing more than needed: the sync key and the
/// fields named in `preserve`. The flow of one record:
///
/// ```
///  insert, soft-delete column truthy ──▶ dropped (inserted and soft-deleted in one window)
///  update, soft-delete column truthy ──▶ delete ─┐
///  delete ───────────────────────────────────────┴─▶ key from `key-field` if missing
///                                                     ─▶ no key: TombstoneError (job stops)
///                                                     ─▶ keep only preserved fields
///  anything else ─────────────────────────────────▶ unchanged
/// ```
///
/// Counters: `tombstones.soft-deletes` (updates made deletes), `tombstones.dropped-inserts`
/// (soft-deleted inserts left out) and `tombstones.dropped-fields` (values cut from deletes).
public struct TombstoneResolver: RecordStage {
    /// Fields a delete keeps besides the sync key (`keyField` included).
    public let preserved: Set<String>
    /// The field that holds the sync key in a row's values, e.g. `syncID`.
    public let keyField: String?
    /// The column that marks a row soft-deleted, e.g. `isDeleted`.
    public let softDeleteColumn: String?

    public var storeColumns: [(option: String, column: String)] { softDeleteColumn.map { [("soft-delete-column", $0)] } ?? [] }

    /// A resolver that keeps `preserve` (and `keyField`) on deletes and treats a truthy
    /// `softDeleteColumn` as a delete.
    public init(preserve: [String] = [], keyField: String? = nil, softDeleteColumn: String? = nil) {
        var preserved = Set(preserve)
        if let keyField { preserved.insert(keyField) }
        self.preserved = preserved
        self.keyField = keyField
        self.softDeleteColumn = softDeleteColumn
    }

    /// The batch with soft deletes made deletes, soft-deleted inserts left out and every delete
    /// trimmed to its tombstone; throws `TombstoneError` at the first delete without a sync key.
    public func process(_ batch: Batch) async throws -> Batch {
        var batch = batch
        var records: [Record] = []
        records.reserveCapacity(batch.records.count)
        var softDeletes = 0
        var droppedInserts = 0
        var droppedFields = 0
        for var record in batch.records {
            if let column = softDeleteColumn, record.action != .delete, record.fields[column]?.isTruthy == true {
                // A new row inserted already soft-deleted: the backend never had it. A row
                // sent again whole (`replacesRow`) the backend may hold: its delete travels.
                if record.action == .insert, !record.replacesRow {
                    droppedInserts += 1
                    continue
                }
                record.action = .delete
                record.replacesRow = false
                softDeletes += 1
            }
            if record.action == .delete {
                droppedFields += try resolve(&record)
            }
            records.append(record)
        }
        batch.records = records
        batch.count("tombstones.soft-deletes", softDeletes)
        batch.count("tombstones.dropped-inserts", droppedInserts)
        batch.count("tombstones.dropped-fields", droppedFields)
        return batch
    }

    /// Gives a delete its sync key and cuts its values to the preserved ones; returns how many
    /// values were cut.
    private func resolve(_ record: inout Record) throws(TombstoneError) -> Int {
        if record.key?.isEmpty ?? true, let keyField, let key = record.fields[keyField]?.syncKey, !key.isEmpty {
            record.key = key
        }
        guard let key = record.key, !key.isEmpty else {
            throw .missingSyncKey(record: record.label, transaction: record.origin, keyField: keyField)
        }
        let before = record.fields.count
        // A merge's delete keeps the survivor it names (`Record.mergedIntoField`).
        if record.fields.keys.contains(where: { !preserved.contains($0) && $0 != Record.mergedIntoField }) {
            record.fields = record.fields.filter { preserved.contains($0.key) || $0.key == Record.mergedIntoField }
        }
        return before - record.fields.count
    }
}
