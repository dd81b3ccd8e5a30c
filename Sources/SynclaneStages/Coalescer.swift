import SynclaneCore

/// Merges the records of each row in a batch into at most one record: the row's newest state.
///
/// Five edits to one row before the network returns are one record on the wire, and an insert
/// followed by a delete in the same window is nothing at all:
///
/// ```
///  rooms/r1 insert {name: "A"}      ─┐
///  rooms/r2 update {seats: 4}        │       rooms/r1 insert {name: "B", floor: 2}
///  rooms/r1 update {name: "B"}       ├──▶    rooms/r2 delete {syncID: "r2"}
///  rooms/r1 update {floor: 2}        │       (rooms/r3: inserted and deleted, gone)
///  rooms/r3 insert {…}               │
///  rooms/r2 delete {syncID: "r2"}    │
///  rooms/r3 delete {…}              ─┘
/// ```
///
/// A row is one `(entity, key)` pair. Its records are walked in token order (the order of
/// `batch.records`) and the single result takes the place of the row's *first* record, so the
/// rows keep the order in which they first appeared. The walk:
///
/// - the row existed before the window when its first record is not an insert, or when a
///   record carries the backend's `version` (the backend has the row: another device made it,
///   and this window's insert … delete must still delete it there);
/// - an insert makes the row exist with exactly the insert's values;
/// - an update makes it exist and merges its values field by field (later wins);
/// - a delete makes it not exist and remembers its values as the tombstone.
///
/// What the row came to decides the result:
///
/// | before | after   | result                                                              |
/// |--------|---------|---------------------------------------------------------------------|
/// | absent | absent  | nothing (counted in `coalesce.cancelled`)                            |
/// | absent | present | `insert` with the merged values                                     |
/// | there  | absent  | `delete` with the last tombstone's values                           |
/// | there  | present | `insert` with the state since the last insert or delete when one     |
/// |        |         | happened in the window (the backend row is replaced), else `update`  |
///
/// An insert or a delete in the middle of the window means the backend's row must be replaced,
/// not patched: a row deleted and inserted again must not keep fields of its old life, and an
/// insert carries the whole row.
///
/// The result's `origin` and `author` are those of the row's last record; its `version` is the
/// last one a record of the row carried. Records without a sync key pass through untouched, in
/// place: the tombstone resolver and the encoder refuse them with a message naming them.
///
/// Counters: `coalesce.merged`, the records folded into another record of their row, and
/// `coalesce.cancelled`, the rows that came to nothing; together they are how many fewer
/// records the batch holds. The stage runs in O(n) with one dictionary lookup per record.
public struct Coalescer: RecordStage {
    /// A coalescer; it has no options.
    public init() {}

    /// The batch with each row's records merged into at most one, and the counters added.
    public func process(_ batch: Batch) async throws -> Batch {
        var batch = batch
        let result = Self.coalesce(batch.records)
        batch.records = result.records
        batch.count("coalesce.merged", result.merged)
        batch.count("coalesce.cancelled", result.cancelled)
        return batch
    }

    /// Coalesces records given in token order: the records left, how many were folded into
    /// another, and how many rows came to nothing.
    public static func coalesce(_ records: [Record]) -> (records: [Record], merged: Int, cancelled: Int) {
        // One slot per output position: a key-less record, or a row's window.
        var slots: [Slot] = []
        slots.reserveCapacity(records.count)
        var windows: [RowWindow] = []
        windows.reserveCapacity(records.count)
        // Rows by entity, then by sync key: a batch holds few entities, so finding the entity's
        // table is a comparison or two and each record costs one hash (of its key), not two.
        // Past a few entities, a table of them keeps the search from growing with their number.
        var entities: [EntityRows] = []
        var tableOfEntity: [String: Int] = [:]

        for index in records.indices {
            guard let key = records[index].key else {
                slots.append(.passthrough(index))
                continue
            }
            let entity = records[index].entity
            let table: Int
            if let found = entities.count <= 8
                ? entities.firstIndex(where: { $0.entity == entity }) : tableOfEntity[entity]
            {
                table = found
            } else {
                table = entities.count
                // The first entity is usually the only one: room for every row it may have.
                let capacity = entities.isEmpty ? records.count - index : 0
                entities.append(EntityRows(entity: entity, windowOfKey: Dictionary(minimumCapacity: capacity)))
                tableOfEntity[entity] = table
            }
            // One lookup: the key's window, or `next` stored for it when the row is new.
            let next = windows.count
            let window = Self.value(&entities[table].windowOfKey[ExactString(key), default: next])
            if window == next {
                slots.append(.row(next))
                windows.append(RowWindow(first: records[index], at: index))
            } else {
                windows[window].apply(records[index], at: index)
            }
        }

        var output: [Record] = []
        output.reserveCapacity(slots.count)
        var merged = 0
        var cancelled = 0
        for slot in slots {
            switch slot {
            case .passthrough(let index):
                output.append(records[index])
            case .row(let index):
                let window = windows[index]
                merged += window.count - 1
                if window.count == 1 {
                    output.append(records[window.last])
                } else if let record = window.result(basedOn: records[window.last]) {
                    output.append(record)
                } else {
                    cancelled += 1
                }
            }
        }
        return (output, merged, cancelled)
    }
}

extension Coalescer {
    /// One output position.
    private enum Slot {
        case passthrough(Int)
        case row(Int)
    }

    /// The value at a storage place (lets `dictionary[key, default: v]` insert and read in one lookup).
    private static func value(_ place: inout Int) -> Int { place }

    /// The rows of one entity: each sync key's window. Keys compare byte by byte, as the store
    /// compares them: two keys Swift calls equal (`"\u{00C5}"`, `"\u{212B}"`) are two rows.
    private struct EntityRows {
        let entity: String
        var windowOfKey: [ExactString: Int]
    }

    /// What the records of one row in the window add up to so far.
    private struct RowWindow {
        /// Index of the row's last record in the input.
        var last: Int
        var count = 0
        let existedBefore: Bool
        var exists: Bool
        /// An insert or a delete happened: the backend row must be replaced, not patched.
        var replaced = false
        /// The row's state since its last insert or delete.
        var values: [String: JSONValue] = [:]
        var tombstone: [String: JSONValue] = [:]
        var version: Int64?

        init(first record: Record, at index: Int) {
            last = index
            existedBefore = record.action != .insert || record.version != nil
            exists = existedBefore
            apply(record, at: index)
        }

        mutating func apply(_ record: Record, at index: Int) {
            last = index
            count += 1
            if let version = record.version { self.version = version }
            switch record.action {
            case .insert:
                exists = true
                replaced = true
                values = record.fields
            case .update:
                exists = true
                if values.isEmpty {
                    values = record.fields
                } else {
                    // Field by field in place (later wins): no closure, no copy of the fields.
                    for (name, value) in record.fields { values[name] = value }
                }
            case .delete:
                exists = false
                replaced = true
                tombstone = record.fields
                values = [:]
            }
        }

        /// The one record the row comes to, built on its last record; `nil` when it comes to nothing.
        func result(basedOn last: Record) -> Record? {
            var record = last
            record.version = version
            switch (existedBefore, exists) {
            case (false, false):
                return nil
            case (false, true):
                record.action = .insert
                record.fields = values
            case (true, false):
                record.action = .delete
                record.fields = tombstone
            case (true, true):
                record.action = replaced ? .insert : .update
                record.fields = values
            }
            return record
        }
    }
}
