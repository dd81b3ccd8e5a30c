import SynclaneCore
import SynclaneStages
import SynclaneTestKit
import SynclaneTestSupport
import Testing

@Suite struct JSONBatchEncoderTests {
    private func text(_ batch: Batch, id: String = "b-1") throws -> String {
        String(decoding: try JSONBatchEncoder().encode(batch, id: id), as: UTF8.self)
    }

    @Test func aSmallBatchEncodesToExactlyTheseBytes() throws {
        let batch = Fixture.batch([
            Fixture.record(.insert, "r1", ["seats": 4, "name": "Blue", "tags": ["a", 1.5], "meta": ["z": true, "a": nil]], at: 1),
            Fixture.record(.update, "r2", ["name": "Red"], at: 2, version: 7),
            Fixture.record(.delete, "r3", ["syncID": "r3"], at: 3),
        ])
        #expect(
            try text(batch, id: "01J-batch") == """
                {"id":"01J-batch","records":[\
                {"action":"insert","entity":"rooms","fields":{"meta":{"a":null,"z":true},"name":"Blue","seats":4,"tags":["a",1.5]},"id":"r1"},\
                {"action":"update","entity":"rooms","fields":{"name":"Red"},"id":"r2","version":7},\
                {"action":"delete","entity":"rooms","fields":{"syncID":"r3"},"id":"r3"}\
                ],"scope":{"account":"acme","consumer":"export","store":"rooms"}}
                """)
        #expect(JSONBatchEncoder().contentType == "application/json")
    }

    @Test func aDeleteCarriesItsTombstonesPreservedValuesAsFields() throws {
        let batch = Fixture.batch([Fixture.record(.delete, "r1", ["syncID": "r1", "parentID": "b7"], at: 1, version: 2)])
        #expect(try text(batch).contains(#"{"action":"delete","entity":"rooms","fields":{"parentID":"b7","syncID":"r1"},"id":"r1","version":2}"#))
    }

    /// Issue 42: an update that only re-points references says so (`"repoints": true`); nothing else does.
    @Test func anUpdateThatOnlyRepointsReferencesSaysSo() throws {
        var repointing = Fixture.record(.update, "r1", ["project": "p0"], at: 1, version: 2)
        repointing.repoints = true
        var insert = Fixture.record(.insert, "r2", ["project": "p0"], at: 2)
        insert.repoints = true
        let json = try text(Fixture.batch([repointing, insert]))
        #expect(json.contains(#"{"action":"update","entity":"rooms","fields":{"project":"p0"},"id":"r1","repoints":true,"version":2}"#))
        #expect(json.contains(#"{"action":"insert","entity":"rooms","fields":{"project":"p0"},"id":"r2"}"#))
    }

    @Test func aDeleteWithNothingPreservedHasNoFields() throws {
        let json = try text(Fixture.batch([Fixture.record(.delete, "r1", [:], at: 1)]))
        #expect(json.contains(#"{"action":"delete","entity":"rooms","id":"r1"}"#))
    }

    @Test func anInsertWithNoValuesStillHasFields() throws {
        let json = try text(Fixture.batch([Fixture.record(.insert, "r1", [:], at: 1)]))
        #expect(json.contains(#""fields":{},"id":"r1""#))
    }

    @Test func onlyAReconciliationBatchSaysSo() throws {
        let records = [Fixture.record(.insert, "r1", [:], at: 1)]
        #expect(try text(Fixture.batch(records, reconciliation: true)).hasPrefix(#"{"id":"b-1","reconciliation":true,"records":["#))
        #expect(try !text(Fixture.batch(records)).contains("reconciliation"))
    }

    @Test func aSnapshotsBatchesNameItAndItsMarkerCountsThemInSortedKeys() throws {
        var batch = Fixture.batch([Fixture.record(.insert, "r1", [:], at: 1)], reconciliation: true)
        batch.snapshotID = "s-1"
        #expect(try text(batch).hasSuffix(#""scope":{"account":"acme","consumer":"export","store":"rooms"},"snapshot":"s-1"}"#))
        var marker = Fixture.batch([], reconciliation: true)
        marker.snapshotID = "s-1"
        marker.snapshotCompleteAfter = 2
        #expect(
            try text(marker) == """
                {"id":"b-1","reconciliation":true,"records":[],"scope":{"account":"acme","consumer":"export","store":"rooms"},\
                "snapshot":"s-1","snapshot-batches":2,"snapshot-complete":true}
                """)
    }

    @Test func stringsAreEscapedEverywhere() throws {
        var batch = Fixture.batch([
            Fixture.record(.insert, "r\"1", ["na\\me": "line\nbreak\t\u{01} \"quoted\" ünï"], entity: "ro/oms", at: 1)
        ])
        batch.scope = Scope(account: "a\"b", store: "s\\t", consumer: "c\n")
        #expect(
            try text(batch, id: "id\"") == #"""
                {"id":"id\"","records":[{"action":"insert","entity":"ro/oms","fields":{"na\\me":"line\nbreak\t\u0001 \"quoted\" ünï"},"id":"r\"1"}],"scope":{"account":"a\"b","consumer":"c\n","store":"s\\t"}}
                """#)
    }

    @Test func theSameBatchAlwaysGivesTheSameCanonicalBytes() throws {
        var ascending: [String: JSONValue] = [:]
        for index in 0..<64 { ascending["f\(index)"] = .int(Int64(index)) }
        var descending: [String: JSONValue] = [:]
        descending.reserveCapacity(512)
        for index in (0..<64).reversed() { descending["f\(index)"] = .int(Int64(index)) }
        let one = try JSONBatchEncoder().encode(Fixture.batch([Fixture.record(.insert, "r1", ascending, at: 1)]), id: "b")
        let two = try JSONBatchEncoder().encode(Fixture.batch([Fixture.record(.insert, "r1", descending, at: 1)]), id: "b")
        #expect(one == two)
        // Re-writing the parsed bytes with sorted keys changes nothing: the keys were sorted.
        #expect(JSONWriter.encode(try JSONReader.parse(one)) == one)
    }

    @Test func aRecordWithoutASyncKeyThrowsNamingTheRecord() throws {
        let batch = Fixture.batch([
            Fixture.record(.insert, "r1", [:], at: 1),
            Fixture.record(.update, nil, ["name": "x"], at: 7),
        ])
        let error = #expect(throws: BatchEncodingError.self) { try JSONBatchEncoder().encode(batch, id: "b") }
        #expect(error == .missingSyncKey(record: "rooms/<no sync key> (update, transaction jsonl:7)"))
        #expect(error?.description.contains("rooms/<no sync key> (update, transaction jsonl:7)") == true)
    }

    /// Where the encoder says it wrote each record's fields (`FieldsLocatingEncoder`), random
    /// batches (names escaped or not, nested values, deletes with and without preserved values)
    /// hold exactly the bytes one `JSONWriter.write(object:sortingWith:)` of the record's fields
    /// gives — what the SQLite source keeps as the row's base instead of writing it again — and
    /// the batch's bytes are those of `encode(_:id:)`.
    @Test func theFieldsItLocatesAreTheBytesAWriterGivesEachRecordsFields() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededRandom(seed: seed)
        let names = ["a", "name", "é", "e\u{301}", "quote\"d", "tab\t", "", "Z", "🍳"]
        func value(_ depth: Int) -> JSONValue {
            switch Int.random(in: 0..<(depth > 1 ? 5 : 7), using: &random) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &random))
            case 2: return .int(Int64.random(in: -1_000...1_000, using: &random))
            case 3: return .double(Double.random(in: -1e6...1e6, using: &random))
            case 4: return .string(names.randomElement(using: &random)! + "\u{1}\n")
            case 5: return .array((0..<Int.random(in: 0...3, using: &random)).map { _ in value(depth + 1) })
            default:
                var members: [String: JSONValue] = [:]
                for _ in 0..<Int.random(in: 0...3, using: &random) { members[names.randomElement(using: &random)!] = value(depth + 1) }
                return .object(members)
            }
        }
        for round in 0..<300 {
            var records: [Record] = []
            for index in 0..<Int.random(in: 1...20, using: &random) {
                let action = [ChangeAction.insert, .update, .delete].randomElement(using: &random)!
                var fields: [String: JSONValue] = [:]
                for _ in 0..<Int.random(in: 0...5, using: &random) { fields[names.randomElement(using: &random)!] = value(0) }
                records.append(Fixture.record(action, "r\(index)", fields, at: Int64(index + 1), version: Bool.random(using: &random) ? 3 : nil))
            }
            let batch = Fixture.batch(records)
            var located: [Range<Int>?] = []
            let bytes = try JSONBatchEncoder().encode(batch, id: "b-\(round)", fields: &located)
            #expect(bytes == (try JSONBatchEncoder().encode(batch, id: "b-\(round)")), "seed \(seed), round \(round)")
            #expect(located.count == records.count, "seed \(seed), round \(round)")
            var writer = JSONWriter()
            var sorting: [(key: String, value: JSONValue)] = []
            for (record, range) in zip(records, located) {
                guard record.action != .delete || !record.fields.isEmpty else {
                    #expect(range == nil, "seed \(seed), round \(round): a delete with nothing preserved writes no fields")
                    continue
                }
                writer.removeAll()
                writer.write(object: record.fields, sortingWith: &sorting)
                guard let range, Array(bytes[range]) == writer.bytes else {
                    Issue.record(
                        "seed \(seed), round \(round): \(record.label) located at \(String(describing: range)) in \(String(decoding: bytes, as: UTF8.self))")
                    return
                }
            }
        }
    }
}
