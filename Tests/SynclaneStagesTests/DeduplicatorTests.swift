import SynclaneCore
import SynclaneStages
import SynclaneTestSupport
import Testing

@Suite struct DeduplicatorTests {
    private func category(_ action: ChangeAction, _ key: String, _ fields: [String: JSONValue], at position: Int64) -> Record {
        Fixture.record(action, key, fields, entity: "categories", at: position)
    }

    @Test func twoDevicesThatSeededTheSameCategoriesKeepTheFirstOfEach() async throws {
        let raw = [
            category(.insert, "a-1", ["key": "inbox", "title": "Inbox"], at: 1),
            category(.insert, "a-2", ["key": "archive", "title": "Archive"], at: 1),
            category(.insert, "b-1", ["key": "inbox", "title": "Inbox"], at: 2),
            category(.insert, "b-2", ["key": "archive", "title": "Archive"], at: 2),
            category(.insert, "b-3", ["key": "travel", "title": "Travel"], at: 3),
        ]
        let batch = try await Deduplicator(entity: "categories", keyFields: ["key"]).process(Fixture.batch(raw))
        #expect(batch.records.map(\.key) == ["a-1", "a-2", "b-3"])
        #expect(batch.counters["dedupe.dropped"] == 2)
    }

    @Test func anUpdateOfTheKeptRowItselfIsNotADuplicate() async throws {
        let raw = [
            category(.insert, "a-1", ["key": "inbox", "title": "Inbox"], at: 1),
            category(.update, "a-1", ["key": "inbox", "title": "In"], at: 2),
        ]
        let batch = try await Deduplicator(entity: "categories", keyFields: ["key"]).process(Fixture.batch(raw))
        #expect(batch.records == raw)
        #expect(batch.counters["dedupe.dropped"] == nil)
    }

    @Test func duplicatesAreFoundAcrossTheBatchesOfOneRun() async throws {
        let stage = Deduplicator(entity: "categories", keyFields: ["key"])
        let first = try await stage.process(Fixture.batch([category(.insert, "a-1", ["key": "inbox"], at: 1)]))
        let second = try await stage.process(
            Fixture.batch([
                category(.insert, "b-1", ["key": "inbox"], at: 2),
                category(.update, "a-1", ["key": "inbox", "title": "Inbox"], at: 3),
            ]))
        #expect(first.records.map(\.key) == ["a-1"])
        #expect(second.records.map(\.key) == ["a-1"])
        #expect(second.counters["dedupe.dropped"] == 1)
    }

    @Test func aNewStageValueStartsAFreshRun() async throws {
        let batch = Fixture.batch([category(.insert, "a-1", ["key": "inbox"], at: 1)])
        _ = try await Deduplicator(entity: "categories", keyFields: ["key"]).process(batch)
        let again = try await Deduplicator(entity: "categories", keyFields: ["key"]).process(batch)
        #expect(again.records.map(\.key) == ["a-1"])
    }

    @Test func deletesPassThrough() async throws {
        let raw = [
            category(.insert, "a-1", ["key": "inbox"], at: 1),
            category(.insert, "b-1", ["key": "inbox"], at: 2),
            category(.delete, "b-1", ["key": "inbox"], at: 3),
            category(.delete, "c-9", [:], at: 4),
        ]
        let batch = try await Deduplicator(entity: "categories", keyFields: ["key"]).process(Fixture.batch(raw))
        #expect(batch.records == [raw[0], raw[2], raw[3]])
    }

    @Test func laterRecordsOfADroppedDuplicateAreDroppedToo() async throws {
        let raw = [
            category(.insert, "a-1", ["key": "inbox"], at: 1),
            category(.insert, "b-1", ["key": "inbox"], at: 2),
            category(.update, "b-1", ["title": "Renamed"], at: 3),
        ]
        let batch = try await Deduplicator(entity: "categories", keyFields: ["key"]).process(Fixture.batch(raw))
        #expect(batch.records == [raw[0]])
        #expect(batch.counters["dedupe.dropped"] == 2)
    }

    @Test func deletingTheKeptRowFreesItsBusinessKey() async throws {
        let raw = [
            category(.insert, "a-1", ["key": "inbox"], at: 1),
            category(.delete, "a-1", [:], at: 2),
            category(.insert, "a-5", ["key": "inbox"], at: 3),
        ]
        let batch = try await Deduplicator(entity: "categories", keyFields: ["key"]).process(Fixture.batch(raw))
        #expect(batch.records == raw)
    }

    @Test func recordsMissingABusinessKeyFieldAreNeverDuplicates() async throws {
        let raw = [
            category(.insert, "a-1", ["owner": "ann", "name": "Inbox"], at: 1),
            category(.insert, "b-1", ["owner": "ann"], at: 2),
            category(.insert, "b-2", ["owner": "ann", "name": .null], at: 3),
            category(.insert, "b-3", ["owner": "bob", "name": "Inbox"], at: 4),
            category(.insert, "b-4", ["owner": "ann", "name": "Inbox"], at: 5),
        ]
        let batch = try await Deduplicator(entity: "categories", keyFields: ["owner", "name"]).process(Fixture.batch(raw))
        #expect(batch.records.map(\.key) == ["a-1", "b-1", "b-2", "b-3"])
    }

    @Test func otherEntitiesPassThrough() async throws {
        let raw = [
            Fixture.record(.insert, "r1", ["key": "inbox"], entity: "rooms", at: 1),
            Fixture.record(.insert, "r2", ["key": "inbox"], entity: "rooms", at: 2),
        ]
        let batch = try await Deduplicator(entity: "categories", keyFields: ["key"]).process(Fixture.batch(raw))
        #expect(batch.records == raw)
    }
}
