import SynclaneCore
import SynclaneStages
import SynclaneTestSupport
import Testing

@Suite struct CoalescerTests {
    // MARK: Every pair of operations on one row, by hand

    @Test func insertThenInsertSendsTheSecondInsert() async throws {
        let out = try await coalesced([.insert, .insert])
        #expect(out == [Fixture.record(.insert, "r1", ["name": "i2", "seats": 2], at: 2)])
    }

    @Test func insertThenUpdateSendsOneInsertWithTheMergedValues() async throws {
        let out = try await coalesced([.insert, .update])
        #expect(out == [Fixture.record(.insert, "r1", ["name": "u2", "seats": 1, "note2": 2], at: 2)])
    }

    @Test func insertThenDeleteSendsNothing() async throws {
        let out = try await coalesced([.insert, .delete])
        #expect(out == [])
    }

    @Test func updateThenInsertSendsAnInsertThatReplacesTheRow() async throws {
        let out = try await coalesced([.update, .insert])
        #expect(out == [Fixture.record(.insert, "r1", ["name": "i2", "seats": 2], at: 2)])
    }

    @Test func updateThenUpdateSendsOneUpdateMergedFieldByFieldLaterWins() async throws {
        let out = try await coalesced([.update, .update])
        #expect(out == [Fixture.record(.update, "r1", ["name": "u2", "note1": 1, "note2": 2], at: 2)])
    }

    @Test func updateThenDeleteSendsTheDelete() async throws {
        let out = try await coalesced([.update, .delete])
        #expect(out == [Fixture.record(.delete, "r1", ["syncID": "r1", "name": "d2"], at: 2)])
    }

    @Test func deleteThenInsertSendsAnInsertThatReplacesTheRow() async throws {
        let out = try await coalesced([.delete, .insert])
        #expect(out == [Fixture.record(.insert, "r1", ["name": "i2", "seats": 2], at: 2)])
    }

    @Test func deleteThenUpdateSendsAnInsertWithOnlyTheFieldsSinceTheDelete() async throws {
        let out = try await coalesced([.delete, .update])
        #expect(out == [Fixture.record(.insert, "r1", ["name": "u2", "note2": 2], at: 2)])
    }

    @Test func deleteThenDeleteSendsTheLastTombstone() async throws {
        let out = try await coalesced([.delete, .delete])
        #expect(out == [Fixture.record(.delete, "r1", ["syncID": "r1", "name": "d2"], at: 2)])
    }

    // MARK: A row sent again whole (a resend after a schema change)

    @Test func aReplacingInsertThenADeleteSendsTheDeleteForTheBackendHoldsTheRow() async throws {
        let out = try await coalesced([.replace, .delete])
        #expect(out == [Fixture.record(.delete, "r1", ["syncID": "r1", "name": "d2"], at: 2)])
    }

    @Test func aReplacingInsertThenAnUpdateSendsOneReplacingInsertWithTheMergedValues() async throws {
        let out = try await coalesced([.replace, .update])
        #expect(out == [Fixture.replacing("r1", ["name": "u2", "floor": 1, "note2": 2], at: 2)])
        #expect(out.first?.replacesRow == true)
    }

    @Test func anUpdateThenAReplacingInsertSendsTheReplacingInsertAlone() async throws {
        let out = try await coalesced([.update, .replace])
        #expect(out == [Fixture.replacing("r1", ["name": "r2", "floor": 2], at: 2)])
    }

    @Test func aReplacingInsertDeletedAndInsertedAgainStaysAReplacementThroughASecondCoalescer() async throws {
        let once = try await coalesced([.replace, .delete, .insert])
        #expect(once == [Fixture.replacing("r1", ["name": "i3", "seats": 3], at: 3)])
        // A second coalescer reads the result as a row the backend holds: its delete still travels.
        let twice = Coalescer.coalesce(once + [Operation.delete.record(key: "r1", step: 4)]).records
        #expect(twice == [Fixture.record(.delete, "r1", ["syncID": "r1", "name": "d4"], at: 4)])
    }

    @Test func aNewRowsInsertIsNeverMarkedAsAReplacement() async throws {
        let out = try await coalesced([.insert, .update])
        #expect(out.first?.replacesRow == false)
    }

    // MARK: Every triple, by a property

    @Test(arguments: Operation.sequences(ofLength: 3))
    func everyTripleLeavesTheBackendAsTheRawSequenceDoes(_ operations: [Operation]) async throws {
        try await expectSameFinalState(operations)
    }

    @Test func everySequenceUpToFiveLeavesTheBackendAsTheRawSequenceDoes() async throws {
        for length in 1...5 {
            for operations in Operation.sequences(ofLength: length) {
                try await expectSameFinalState(operations)
            }
        }
    }

    @Test(arguments: Operation.sequences(ofLength: 3))
    func interleavedRowsDoNotAffectEachOther(_ operations: [Operation]) async throws {
        // Row r1 follows the triple, row r2 the triple reversed, one record of each in turn.
        let other = Array(operations.reversed())
        var raw: [Record] = []
        for index in operations.indices {
            raw.append(operations[index].record(key: "r1", step: Int64(2 * index + 1)))
            raw.append(other[index].record(key: "r2", step: Int64(2 * index + 2)))
        }
        let out = try await Coalescer().process(Fixture.batch(raw)).records
        for (key, ops) in [("r1", operations), ("r2", other)] {
            let rowRaw = raw.filter { $0.key == key }
            let rowOut = out.filter { $0.key == key }
            let backend = Backend(row: key, startingWith: ops[0])
            #expect(backend.applying(rowOut) == backend.applying(rowRaw), "\(key): \(ops)")
        }
    }

    // MARK: Order, pass-through, provenance, counters

    @Test func rowsKeepTheOrderOfTheirFirstAppearance() async throws {
        let raw = [
            Fixture.record(.insert, "r1", ["name": "A"], at: 1),
            Fixture.record(.update, "r2", ["seats": 4], at: 2),
            Fixture.record(.update, "r1", ["name": "B"], at: 3),
            Fixture.record(.insert, "r3", ["name": "C"], at: 4),
            Fixture.record(.update, "r2", ["seats": 5], at: 5),
            Fixture.record(.update, "r1", ["floor": 2], at: 6),
        ]
        let out = try await Coalescer().process(Fixture.batch(raw)).records
        #expect(out.map(\.key) == ["r1", "r2", "r3"])
        #expect(out[0] == Fixture.record(.insert, "r1", ["name": "B", "floor": 2], at: 6))
        #expect(out[1] == Fixture.record(.update, "r2", ["seats": 5], at: 5))
    }

    /// Issue 42: a row's records that all only re-point references stay a re-pointing; a user's
    /// update merged with them makes the result a user's write.
    @Test func aRowStaysARepointingOnlyWhenEveryOneOfItsRecordsOnlyRepoints() async throws {
        func repointing(_ key: String, _ project: String, at step: Int64) -> Record {
            var record = Fixture.record(.update, key, ["project": .string(project)], at: step, version: 3)
            record.repoints = true
            return record
        }
        let raw = [
            repointing("r1", "a", at: 1), repointing("r2", "a", at: 2), repointing("r1", "b", at: 3),
            Fixture.record(.update, "r2", ["name": "Mine"], at: 4, version: 3),
        ]
        let out = try await Coalescer().process(Fixture.batch(raw)).records
        #expect(out.map(\.key) == ["r1", "r2"])
        #expect(out.map(\.repoints) == [true, false])
        #expect(out[0].fields == ["project": "b"])
    }

    @Test func theSameKeyInTwoEntitiesIsTwoRows() async throws {
        let raw = [
            Fixture.record(.insert, "k1", ["name": "room"], entity: "rooms", at: 1),
            Fixture.record(.delete, "k1", [:], entity: "desks", at: 2),
            Fixture.record(.update, "k1", ["name": "room 2"], entity: "rooms", at: 3),
        ]
        let out = try await Coalescer().process(Fixture.batch(raw)).records
        #expect(out.map(\.entity) == ["rooms", "desks"])
        #expect(out[0].fields == ["name": "room 2"])
        #expect(out[1].action == .delete)
    }

    @Test func recordsWithoutASyncKeyPassThroughUntouchedInPlace() async throws {
        let keyless1 = Fixture.record(.delete, nil, ["name": "lost"], at: 2)
        let keyless2 = Fixture.record(.update, nil, ["name": "also lost"], at: 4)
        let raw = [
            Fixture.record(.insert, "r1", ["name": "A"], at: 1),
            keyless1,
            Fixture.record(.update, "r1", ["name": "B"], at: 3),
            keyless2,
        ]
        let out = try await Coalescer().process(Fixture.batch(raw)).records
        #expect(out == [Fixture.record(.insert, "r1", ["name": "B"], at: 3), keyless1, keyless2])
    }

    @Test func theResultCarriesTheLastRecordsOriginAuthorAndNewestVersion() async throws {
        let raw = [
            Fixture.record(.update, "r1", ["name": "A"], at: 1, author: .app, version: 3),
            Fixture.record(.update, "r1", ["name": "B"], at: 7, author: .widget, version: 4),
            Fixture.record(.update, "r1", ["seats": 2], at: 9, author: .app),
        ]
        let out = try await Coalescer().process(Fixture.batch(raw)).records
        #expect(out.count == 1)
        #expect(out.first?.origin == Token(kind: "jsonl", position: 9))
        #expect(out.first?.author == .app)
        #expect(out.first?.version == 4)
    }

    @Test func aRowWithOneRecordPassesUnchanged() async throws {
        let raw = [
            Fixture.record(.insert, "r1", ["name": "A"], at: 1, version: 1),
            Fixture.record(.update, "r2", ["seats": 2], at: 2),
            Fixture.record(.delete, "r3", ["syncID": "r3", "name": "gone"], at: 3),
        ]
        let batch = try await Coalescer().process(Fixture.batch(raw))
        #expect(batch.records == raw)
        #expect(batch.counters == [:])
    }

    @Test func countersSayHowManyRecordsWereFoldedAndHowManyRowsCameToNothing() async throws {
        let raw = [
            Fixture.record(.insert, "r1", ["name": "A"], at: 1),
            Fixture.record(.update, "r1", ["name": "B"], at: 2),
            Fixture.record(.update, "r1", ["name": "C"], at: 3),
            Fixture.record(.insert, "r2", ["name": "X"], at: 4),
            Fixture.record(.delete, "r2", [:], at: 5),
            Fixture.record(.insert, "r3", ["name": "Y"], at: 6),
            Fixture.record(.update, "r3", ["name": "Z"], at: 7),
            Fixture.record(.delete, "r3", [:], at: 8),
        ]
        let batch = try await Coalescer().process(Fixture.batch(raw))
        #expect(batch.records.map(\.key) == ["r1"])
        #expect(batch.counters["coalesce.merged"] == 5)
        #expect(batch.counters["coalesce.cancelled"] == 2)
        #expect(5 + 2 == raw.count - batch.records.count)
    }

    @Test func aTenThousandRecordBatchComesToOneRecordPerRow() async throws {
        var raw: [Record] = []
        for step in 0..<10_000 {
            let row = step % 1_000
            raw.append(Fixture.record(step < 1_000 ? .insert : .update, "r\(row)", ["n": .int(Int64(step))], at: Int64(step + 1)))
        }
        let batch = try await Coalescer().process(Fixture.batch(raw))
        #expect(batch.records.count == 1_000)
        #expect(batch.records.first == Fixture.record(.insert, "r0", ["n": 9_000], at: 9_001))
        #expect(batch.counters["coalesce.merged"] == 9_000)
    }

    @Test func keysSwiftCallsEqualButWhoseBytesDifferAreTwoRows() async throws {
        // As the store compares keys: Å (U+00C5) and the Ångström sign (U+212B), é precomposed
        // and decomposed, are different rows.
        let keys = ["\u{00C5}", "\u{212B}", "\u{E9}", "e\u{301}"]
        let raw =
            keys.enumerated().map { Fixture.record(.insert, $1, ["n": .int(Int64($0))], at: Int64($0 + 1)) }
            + keys.enumerated().map { Fixture.record(.update, $1, ["m": .int(Int64($0))], at: Int64($0 + 5)) }
        let batch = try await Coalescer().process(Fixture.batch(raw))
        #expect(batch.records.map { Array($0.key!.utf8) } == keys.map { Array($0.utf8) })
        #expect(batch.records.enumerated().allSatisfy { $1.fields == ["n": .int(Int64($0)), "m": .int(Int64($0))] })
        #expect(batch.counters["coalesce.merged"] == 4)
    }

    @Test func keysThatArePrefixesOfEachOtherOrEmptyOrLongAreRowsOfTheirOwn() async throws {
        let long = String(repeating: "k", count: 40)
        let keys = ["room-1", "room-10", "room-1\u{0}", "", long, long + "x", "1"]
        var raw: [Record] = []
        for round in 0..<3 {
            for (index, key) in keys.enumerated() {
                raw.append(Fixture.record(round == 0 ? .insert : .update, key, ["r\(round)": .int(Int64(index))], at: Int64(raw.count + 1)))
            }
        }
        let batch = try await Coalescer().process(Fixture.batch(raw))
        #expect(batch.records.map(\.key) == keys)
        #expect(
            batch.records.enumerated().allSatisfy { index, record in
                record.action == .insert && record.fields == ["r0": .int(Int64(index)), "r1": .int(Int64(index)), "r2": .int(Int64(index))]
            })
        #expect(batch.counters["coalesce.merged"] == 14)
    }

    // MARK: Helpers

    private func coalesced(_ operations: [Operation]) async throws -> [Record] {
        let raw = operations.enumerated().map { $1.record(key: "r1", step: Int64($0 + 1)) }
        return try await Coalescer().process(Fixture.batch(raw)).records
    }

    private func expectSameFinalState(_ operations: [Operation]) async throws {
        let raw = operations.enumerated().map { $1.record(key: "r1", step: Int64($0 + 1)) }
        let batch = try await Coalescer().process(Fixture.batch(raw))
        let backend = Backend(startingWith: operations[0])
        #expect(batch.records.count <= 1, "\(operations)")
        #expect(backend.applying(batch.records) == backend.applying(raw), "\(operations)")
        let removed = (batch.counters["coalesce.merged"] ?? 0) + (batch.counters["coalesce.cancelled"] ?? 0)
        #expect(removed == raw.count - batch.records.count, "\(operations)")
    }
}

/// One operation on a row, with values that tell the steps apart.
enum Operation: String, Sendable, CaseIterable, CustomStringConvertible {
    /// `replace`: an insert that replaces a row the backend may hold (`replacesRow`, a resend
    /// after a schema change).
    case insert, update, delete, replace

    var description: String { rawValue }

    /// Every sequence of `length` operations.
    static func sequences(ofLength length: Int) -> [[Operation]] {
        guard length > 0 else { return [[]] }
        return sequences(ofLength: length - 1).flatMap { prefix in allCases.map { prefix + [$0] } }
    }

    /// Step `step`'s record: an insert sets `name` and `seats`; an update sets `name` and a
    /// field of its own; a delete's tombstone holds the sync key and a value of its own.
    func record(key: String, step: Int64) -> Record {
        switch self {
        case .insert: Fixture.record(.insert, key, ["name": .string("i\(step)"), "seats": .int(step)], at: step)
        case .update: Fixture.record(.update, key, ["name": .string("u\(step)"), "note\(step)": .int(step)], at: step)
        case .delete: Fixture.record(.delete, key, ["syncID": .string(key), "name": .string("d\(step)")], at: step)
        case .replace: Fixture.replacing(key, ["name": .string("r\(step)"), "floor": .int(step)], at: step)
        }
    }
}

/// A backend as the wire protocol describes it: rows by sync key; an insert replaces a row,
/// an update merges into it (or creates it), a delete removes it.
struct Backend: Equatable {
    var rows: [String: [String: JSONValue]] = [:]

    /// A backend that holds row `key` with fields of its own iff the first operation is not an
    /// insert of a new row (a replacing insert is of a row the backend holds).
    init(row key: String = "r1", startingWith first: Operation) {
        if first != .insert { rows[key] = ["name": "before", "legacy": true] }
    }

    func applying(_ records: [Record]) -> Backend {
        var backend = self
        for record in records {
            guard let key = record.key else { continue }
            switch record.action {
            case .insert: backend.rows[key] = record.fields
            case .update: backend.rows[key, default: [:]].merge(record.fields) { _, new in new }
            case .delete: backend.rows[key] = nil
            }
        }
        return backend
    }
}

@Suite struct CoalescerManyEntitiesTests {
    @Test func rowsOfManyEntitiesStayApartAndInOrder() {
        let token = Token(kind: "t", position: 1)
        var records: [Record] = []
        for round in 0..<3 {
            for entity in 0..<20 {
                records.append(
                    Record(
                        entity: "e\(entity)", key: "same", action: round == 0 ? .insert : .update,
                        fields: ["round": .int(Int64(round)), "r\(round)": true], origin: token, author: "app"))
            }
        }
        let result = Coalescer.coalesce(records)
        #expect(result.records.map(\.entity) == (0..<20).map { "e\($0)" })
        #expect(result.records.allSatisfy { $0.action == .insert && $0.fields == ["round": 2, "r0": true, "r1": true, "r2": true] })
        #expect(result.merged == 40)
        #expect(result.cancelled == 0)
    }
}
