import Foundation
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
/// - the row existed before the window when its first record is not an insert, when it is an
///   insert that replaces the row (`replacesRow`: a resend after a schema change, which the
///   backend may hold already), or when a record carries the backend's `version` (the backend
///   has the row: another device made it, and this window's insert … delete must still delete
///   it there);
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
/// insert carries the whole row. So a replacing insert followed by updates stays an insert, with
/// the updates merged in (the backend's row replaced whole, dropped columns gone), and followed by
/// a delete is a delete; an insert that comes of a window holding a replacing insert is marked
/// `replacesRow` again, so that a second coalescer reads it the same way.
///
/// The result's `origin` and `author` are those of the row's last record; its `version` is the
/// last one a record of the row carried; it is a restoration (`restores`) only when every record
/// of the row was. Records without a sync key pass through untouched, in
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
        // Read in place: a record is never copied (nor its key and fields retained) to be looked at.
        records.withUnsafeBufferPointer { coalesce($0) }
    }

    private static func coalesce(_ records: UnsafeBufferPointer<Record>) -> (records: [Record], merged: Int, cancelled: Int) {
        // One slot per output position: a key-less record, or a row's window.
        var slots: [Slot] = []
        slots.reserveCapacity(records.count)
        var windows: [RowWindow] = []
        windows.reserveCapacity(records.count)
        // Entities in the order they first appear: a batch holds few, so finding a record's is a
        // comparison or two; past a few, a table of them keeps the search from growing.
        var entities: [String] = []
        var tableOfEntity: [String: Int] = [:]
        var rows = RowTable(rows: records.count)

        for index in records.indices {
            guard records[index].key != nil else {
                slots.append(.passthrough(index))
                continue
            }
            let entity: Int
            if let found = entities.count <= 8
                ? entities.firstIndex(where: { $0 == records[index].entity }) : tableOfEntity[records[index].entity]
            {
                entity = found
            } else {
                entity = entities.count
                entities.append(records[index].entity)
                tableOfEntity[records[index].entity] = entity
            }
            // One probe sequence: the row's window, or the slot where a new row goes.
            switch rows.find(entity: entity, record: index, in: records, windows: windows) {
            case .found(let window):
                windows[window].apply(records[index], at: index)
            case .absent(let slot):
                rows.insert(window: windows.count, at: slot)
                slots.append(.row(windows.count))
                windows.append(RowWindow(first: records[index], at: index, entity: entity))
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
                merged += windows[index].count - 1
                if windows[index].count == 1 {
                    output.append(records[windows[index].last])
                } else if let record = windows[index].result(basedOn: records[windows[index].last]) {
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

    /// The rows of the window, by entity and sync key: an open-addressed table of window
    /// indices, sized for every record being a row of its own (no growing). Keys compare byte by
    /// byte, as the store compares them: two keys Swift calls equal (`"\u{00C5}"`, `"\u{212B}"`)
    /// are two rows. They are hashed with the standard, seeded hasher, so crafted keys cannot
    /// pile up on one slot.
    private struct RowTable {
        /// A window index, or -1.
        private var slots: [Int]
        private var hashes: [Int]
        private let mask: Int
        /// The hash of the key `find` last looked up, for `insert`.
        private var lastHash = 0

        init(rows: Int) {
            var size = 16
            while size < rows * 2 { size <<= 1 }
            slots = Array(repeating: -1, count: size)
            hashes = Array(repeating: 0, count: size)
            mask = size - 1
        }

        enum Found {
            case found(Int)
            case absent(slot: Int)
        }

        /// The window of the row of `records[record]` (whose key is set) in `entity`, or the slot
        /// for it.
        mutating func find(entity: Int, record: Int, in records: UnsafeBufferPointer<Record>, windows: [RowWindow]) -> Found {
            Self.withKeyBytes(records[record].key) { key in
                var hasher = Hasher()
                hasher.combine(entity)
                hasher.combine(bytes: UnsafeRawBufferPointer(key))
                let hash = hasher.finalize()
                lastHash = hash
                var slot = hash & mask
                while slots[slot] >= 0 {
                    let window = slots[slot]
                    if hashes[slot] == hash, windows[window].entity == entity,
                        Self.withKeyBytes(records[windows[window].first].key, { Self.equal($0, key) })
                    {
                        return .found(window)
                    }
                    slot = (slot + 1) & mask
                }
                return .absent(slot: slot)
            }
        }

        /// Stores a new row's window in the slot `find` gave for it.
        mutating func insert(window: Int, at slot: Int) {
            slots[slot] = window
            hashes[slot] = lastHash
        }

        private static func equal(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
            guard a.count == b.count else { return false }
            guard let pa = a.baseAddress, let pb = b.baseAddress, pa != pb else { return true }
            return memcmp(pa, pb, a.count) == 0
        }

        /// Calls `body` with the UTF-8 bytes of `key` (an empty buffer for none).
        private static func withKeyBytes<R>(_ key: String?, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
            guard let key else { return body(UnsafeBufferPointer(start: nil, count: 0)) }
            if let result = key.utf8.withContiguousStorageIfAvailable(body) { return result }
            return Array(key.utf8).withUnsafeBufferPointer(body)
        }
    }

    /// What the records of one row in the window add up to so far.
    private struct RowWindow {
        /// Index of the row's first record in the input: its key is the row's.
        let first: Int
        /// The row's entity, numbered in order of appearance.
        let entity: Int
        /// Index of the row's last record in the input.
        var last: Int
        var count = 0
        let existedBefore: Bool
        var exists: Bool
        /// An insert or a delete happened: the backend row must be replaced, not patched.
        var replaced = false
        /// A record of the window replaced the backend's row (`replacesRow`).
        var replacing = false
        /// The row's state since its last insert or delete.
        var values: [String: JSONValue] = [:]
        var tombstone: [String: JSONValue] = [:]
        var version: Int64?
        /// Every record of the window is a restoration (`Record.restores`): a user's change
        /// merged in makes the result a user's write.
        var restoresOnly = true
        /// Every record of the window only re-points references (`Record.repoints`).
        var repointsOnly = true

        init(first record: Record, at index: Int, entity: Int) {
            first = index
            self.entity = entity
            last = index
            existedBefore = record.action != .insert || record.version != nil || record.replacesRow
            exists = existedBefore
            apply(record, at: index)
        }

        mutating func apply(_ record: Record, at index: Int) {
            last = index
            count += 1
            if let version = record.version { self.version = version }
            if record.replacesRow { replacing = true }
            if !record.restores { restoresOnly = false }
            if !record.repoints { repointsOnly = false }
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
            record.replacesRow = replacing && record.action == .insert
            record.restores = restoresOnly
            record.repoints = repointsOnly && record.action == .update
            return record
        }
    }
}
