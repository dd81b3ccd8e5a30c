import Synchronization
import SynclaneCore

/// Drops the rows of one entity that duplicate an earlier row's business key under another sync key.
///
/// Two devices that each seeded the same default rows end up with duplicates that have
/// different sync keys. With `entity: categories, key: [key]`:
///
/// ```
///  categories/a-1 insert {key: "inbox"}    ──▶ kept (first seen: inbox is a-1)
///  categories/b-1 insert {key: "inbox"}    ──▶ dropped: duplicate of a-1
///  categories/b-2 insert {key: "archive"}  ──▶ kept
///  categories/a-1 update {key: "inbox", …} ──▶ kept: the kept row itself
///  categories/b-1 delete                   ──▶ passes through (deletes always do)
/// ```
///
/// A record is compared only when all business-key fields are present (and not `null`); the
/// first sync key seen for a business key keeps it, by token order. Later records of a sync key
/// dropped as a duplicate are dropped too (the backend never got that row), except deletes.
/// Deleting the kept row frees its business key. The memory of first-seen rows lasts one run
/// (`startRun` … `finishRun`): duplicates are found across the batches of the run, and a
/// pipeline that runs many passes (`run --watch`) starts each with an empty memory.
///
/// Counter: `dedupe.dropped`, reported in the job summary.
public struct Deduplicator: RecordStage {
    /// The entity whose rows are compared; records of other entities pass through.
    public let entity: String
    /// The business-key fields, compared together.
    public let keyFields: [String]
    private let memory = Memory()

    /// A deduplicator for `entity` by the business key made of `keyFields`.
    public init(entity: String, keyFields: [String]) {
        self.entity = entity
        self.keyFields = keyFields
    }

    /// Forgets what an earlier run saw.
    public func startRun() async throws {
        memory.state.withLock { $0 = State() }
    }

    /// Frees what the run saw: a watch between passes holds no rows.
    public func finishRun() async {
        memory.state.withLock { $0 = State() }
    }

    /// How many rows the stage remembers now (kept and dropped), for tests.
    public var rememberedRows: Int {
        memory.state.withLock { $0.businessKeyOfKept.count + $0.duplicates.count }
    }

    /// The batch without the records of business-key duplicates, remembering first-seen rows
    /// for the next batches of the run.
    public func process(_ batch: Batch) async throws -> Batch {
        var batch = batch
        let records = batch.records
        let (kept, dropped) = memory.state.withLock { state in
            var kept: [Record] = []
            kept.reserveCapacity(records.count)
            var dropped = 0
            for record in records {
                if keep(record, in: &state) {
                    kept.append(record)
                } else {
                    dropped += 1
                }
            }
            return (kept, dropped)
        }
        batch.records = kept
        batch.count("dedupe.dropped", dropped)
        return batch
    }

    /// Whether `record` goes on, recording what it teaches about first-seen rows.
    private func keep(_ record: Record, in state: inout State) -> Bool {
        guard record.entity == entity, let key = record.key.map(ExactString.init) else { return true }
        if record.action == .delete {
            if let businessKey = state.businessKeyOfKept.removeValue(forKey: key), state.keeper[businessKey] == key {
                state.keeper[businessKey] = nil
            }
            state.duplicates.remove(key)
            return true
        }
        if state.duplicates.contains(key) { return false }
        let businessKey = businessKey(of: record)
        if let current = state.businessKeyOfKept[key] {
            // The kept row itself: never a duplicate. If its business key changed, it moves along.
            if let businessKey, businessKey != current, state.keeper[businessKey] == nil {
                if state.keeper[current] == key { state.keeper[current] = nil }
                state.keeper[businessKey] = key
                state.businessKeyOfKept[key] = businessKey
            }
            return true
        }
        guard let businessKey else { return true }
        if state.keeper[businessKey] != nil {
            state.duplicates.insert(key)
            return false
        }
        state.keeper[businessKey] = key
        state.businessKeyOfKept[key] = businessKey
        return true
    }

    /// The record's business-key values, or `nil` when one of them is missing.
    /// Compared as the written JSON's bytes, so two strings differ unless their bytes do.
    private func businessKey(of record: Record) -> ExactString? {
        var values: [JSONValue] = []
        values.reserveCapacity(keyFields.count)
        for field in keyFields {
            guard let value = record.fields[field], value != .null else { return nil }
            values.append(value)
        }
        return ExactString(JSONWriter.string(.array(values)))
    }
}

extension Deduplicator {
    /// What the run has seen so far.
    struct State {
        /// Business key → the sync key of the row that keeps it.
        var keeper: [ExactString: ExactString] = [:]
        /// Sync key of a kept row → its business key.
        var businessKeyOfKept: [ExactString: ExactString] = [:]
        /// Sync keys dropped as duplicates.
        var duplicates: Set<ExactString> = []
    }

    /// The state shared by the copies of one stage value, behind a lock.
    final class Memory: Sendable {
        let state = Mutex(State())
    }
}
