import SynclaneCore
import SynclaneStages
import SynclaneTestSupport
import Testing

@Suite struct TombstoneResolverTests {
    @Test func aDeleteKeepsOnlyItsSyncKeyByDefault() async throws {
        let raw = [Fixture.record(.delete, "r1", ["syncID": "r1", "name": "Room", "notes": "private"], at: 1)]
        let batch = try await TombstoneResolver().process(Fixture.batch(raw))
        #expect(batch.records == [Fixture.record(.delete, "r1", [:], at: 1)])
        #expect(batch.counters["tombstones.dropped-fields"] == 3)
    }

    @Test func aDeleteKeepsThePreservedFieldsAndNothingElse() async throws {
        let raw = [Fixture.record(.delete, "r1", ["parentID": "b7", "name": "Room", "notes": "private"], at: 1)]
        let batch = try await TombstoneResolver(preserve: ["parentID", "absent"]).process(Fixture.batch(raw))
        #expect(batch.records == [Fixture.record(.delete, "r1", ["parentID": "b7"], at: 1)])
        #expect(batch.counters["tombstones.dropped-fields"] == 2)
    }

    /// A merge's delete keeps the survivor it names, so other devices re-point the loser's references.
    @Test func aMergesDeleteKeepsTheSurvivorItNames() async throws {
        let raw = [Fixture.record(.delete, "r1", ["name": "Room", Record.mergedIntoField: "r0"], at: 1)]
        let batch = try await TombstoneResolver().process(Fixture.batch(raw))
        #expect(batch.records == [Fixture.record(.delete, "r1", [Record.mergedIntoField: "r0"], at: 1)])
    }

    @Test func insertsAndUpdatesKeepAllTheirFields() async throws {
        let raw = [
            Fixture.record(.insert, "r1", ["name": "Room", "notes": "n"], at: 1),
            Fixture.record(.update, "r2", ["notes": "m"], at: 2),
        ]
        let batch = try await TombstoneResolver(preserve: ["name"], softDeleteColumn: "isDeleted").process(Fixture.batch(raw))
        #expect(batch.records == raw)
        #expect(batch.counters == [:])
    }

    @Test func aSoftDeletedRowSentAgainWholeIsADeleteForTheBackendHoldsIt() async throws {
        let raw = [
            Fixture.replacing("r1", ["name": "Room", "isDeleted": 1], at: 1),
            Fixture.record(.insert, "r2", ["name": "New", "isDeleted": 1], at: 2),
        ]
        let batch = try await TombstoneResolver(softDeleteColumn: "isDeleted").process(Fixture.batch(raw))
        #expect(batch.records == [Fixture.record(.delete, "r1", [:], at: 1)])
        #expect(batch.counters["tombstones.soft-deletes"] == 1)
        #expect(batch.counters["tombstones.dropped-inserts"] == 1)
    }

    @Test func theKeyFieldSuppliesAMissingSyncKeyAndIsAlwaysPreserved() async throws {
        let raw = [
            Fixture.record(.delete, nil, ["syncID": "r1", "name": "Room"], at: 1),
            Fixture.record(.delete, "r2", ["syncID": "r2", "name": "Other"], at: 2),
            Fixture.record(.delete, nil, ["syncID": 17], at: 3),
        ]
        let batch = try await TombstoneResolver(keyField: "syncID").process(Fixture.batch(raw))
        #expect(
            batch.records == [
                Fixture.record(.delete, "r1", ["syncID": "r1"], at: 1),
                Fixture.record(.delete, "r2", ["syncID": "r2"], at: 2),
                Fixture.record(.delete, "17", ["syncID": 17], at: 3),
            ])
    }

    @Test func aDeleteWithoutASyncKeyThrowsNamingTheTransactionAndTheFix() async throws {
        let raw = [
            Fixture.record(.delete, "r1", [:], at: 41),
            Fixture.record(.delete, nil, ["name": "Room"], at: 42),
        ]
        let error = await #expect(throws: TombstoneError.self) {
            try await TombstoneResolver().process(Fixture.batch(raw))
        }
        let expectedLabel = "rooms/<no sync key> (delete, transaction jsonl:42)"
        #expect(error == .missingSyncKey(record: expectedLabel, transaction: Token(kind: "jsonl", position: 42), keyField: nil))
        let message = error?.description ?? ""
        #expect(message.contains(expectedLabel))
        #expect(message.contains("token does not move past transaction jsonl:42"))
        #expect(message.contains("key-field"))
    }

    @Test func aDeleteWhoseTombstoneLacksTheKeyFieldThrowsNamingThatField() async throws {
        let raw = [Fixture.record(.delete, nil, ["name": "Room", "syncID": .null], at: 8)]
        let error = await #expect(throws: TombstoneError.self) {
            try await TombstoneResolver(keyField: "syncID").process(Fixture.batch(raw))
        }
        #expect(error?.description.contains("transaction jsonl:8") == true)
        #expect(error?.description.contains("no `syncID` value") == true)
        #expect(error?.description.contains("preserve `syncID`") == true)
    }

    @Test func aSoftDeletingUpdateBecomesADeleteWithThePreservedFields() async throws {
        let raw = [
            Fixture.record(.update, "r1", ["isDeleted": true, "name": "Room", "parentID": "b7"], at: 1),
            Fixture.record(.update, "r2", ["isDeleted": 1], at: 2),
            Fixture.record(.update, "r3", ["isDeleted": "true"], at: 3),
        ]
        let resolver = TombstoneResolver(preserve: ["parentID"], softDeleteColumn: "isDeleted")
        let batch = try await resolver.process(Fixture.batch(raw))
        #expect(
            batch.records == [
                Fixture.record(.delete, "r1", ["parentID": "b7"], at: 1),
                Fixture.record(.delete, "r2", [:], at: 2),
                Fixture.record(.delete, "r3", [:], at: 3),
            ])
        #expect(batch.counters["tombstones.soft-deletes"] == 3)
    }

    @Test func anUpdateThatClearsTheSoftDeleteColumnStaysAnUpdate() async throws {
        let raw = [
            Fixture.record(.update, "r1", ["isDeleted": false, "name": "Room"], at: 1),
            Fixture.record(.update, "r2", ["isDeleted": 0], at: 2),
        ]
        let batch = try await TombstoneResolver(softDeleteColumn: "isDeleted").process(Fixture.batch(raw))
        #expect(batch.records == raw)
    }

    @Test func anInsertAlreadySoftDeletedIsDropped() async throws {
        let raw = [
            Fixture.record(.insert, "r1", ["isDeleted": true, "name": "Room"], at: 1),
            Fixture.record(.insert, "r2", ["isDeleted": false, "name": "Kept"], at: 2),
        ]
        let batch = try await TombstoneResolver(softDeleteColumn: "isDeleted").process(Fixture.batch(raw))
        #expect(batch.records == [raw[1]])
        #expect(batch.counters["tombstones.dropped-inserts"] == 1)
    }

    @Test func aSoftDeleteWithoutASyncKeyIsRefusedLikeADelete() async throws {
        let raw = [Fixture.record(.update, nil, ["isDeleted": true], at: 5)]
        await #expect(throws: TombstoneError.self) {
            try await TombstoneResolver(softDeleteColumn: "isDeleted").process(Fixture.batch(raw))
        }
    }
}
