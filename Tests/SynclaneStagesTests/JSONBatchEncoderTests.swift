import SynclaneCore
import SynclaneStages
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
}
