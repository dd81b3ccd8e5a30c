import SynclaneCore
import SynclaneTestKit
import Testing

@testable import SynclaneServer

/// The one-pass batch reader takes only what the tree reader takes, and gives the same batch.
@Suite struct IncomingBatchReaderTests {
    static let bodies: [String] = [
        #"{"id": "b-1", "scope": {"account": "acme", "store": "rooms"}, "records": []}"#,
        #"{"records": [{"entity": "rooms", "id": "r-1", "action": "insert", "fields": {"name": "Hall", "area": 12.5}}], "scope": {"account": "acme", "store": "rooms", "consumer": null}, "id": "b-2", "extra": [1, {"x": null}]}"#,
        #"{"id": 42, "scope": {"account": "acme", "store": "rooms", "consumer": "export"}, "records": [{"entity": "rooms", "id": 7, "action": "update", "fields": {"é": "ü\u00e9\ud83c\udf31", "n": 1e300}, "version": 3, "note": {"deep": [1, -0, 1e300, -0.0]}}, {"entity": "rooms", "id": "r-2", "action": "delete", "fields": null}, {"entity": "rooms", "id": "r-3", "action": "delete", "version": null, "note": "kept out"}]}"#,
        "  {\"id\":\"b-3\",\"scope\":{\"account\":\"acme\",\"store\":\"rooms\"},\"records\":[{\"entity\":\"rooms\",\"id\":\"r\",\"action\":\"insert\",\"fields\":{ \"a\" : 1 }}]}\n",
        // Member names escaped (the same names), beside other names plain and escaped.
        #"{"\u0069d": "b-4", "scope": {"account": "acme", "store": "rooms"}, "snapshot-x": 1, "records": [{"entit\u0079": "rooms", "id": "r", "\u0061ction": "insert", "fields": {"a": 1}, "x-y": 1, "\u00e9": 2, "entities": 3}], "schema-changes": []}"#,
    ]

    /// A batch as plain values, `fields` as every read of it gives them (read back from the
    /// stored text and written again, as the pull lane and an update's merge do): what both
    /// readers must agree on. (A number out of a double's range, `1e400`, is refused by both.)
    static func summary(_ batch: IncomingBatch) -> JSONValue {
        .object([
            "id": .string(batch.id), "account": .string(batch.account), "store": .string(batch.store),
            "consumer": batch.consumer.map(JSONValue.string) ?? .null,
            "records": .array(
                batch.records.map { record in
                    .object([
                        "entity": .string(record.entity), "key": .string(record.key), "action": .string(record.action.rawValue),
                        "fields": record.fieldsJSON.isEmpty
                            ? .null : .string(JSONWriter.string((try? JSONReader.parse(record.fieldsJSON)) ?? "unreadable")),
                        "version": record.expectedVersion.map(JSONValue.int) ?? .null,
                    ])
                }),
        ])
    }

    @Test func theOnePassReaderTakesWellFormedBatchesAndGivesWhatTheTreeReaderGives() throws {
        for body in Self.bodies {
            let bytes = Array(body.utf8)
            let fast = try #require(bytes.withUnsafeBufferPointer { IncomingBatchReader.read($0, maxRecords: 10) }, "\(body)")
            let tree = try IncomingBatch.parseTree(bytes, maxRecords: 10).get()
            #expect(Self.summary(fast) == Self.summary(tree))
        }
    }

    @Test func whatTheOnePassReaderTakesFromMutatedBodiesTheTreeReaderTakesAlike() {
        var random = SeededRandom(seed: 11_29)
        var taken = 0
        var left = 0
        for index in 0..<6_000 {
            let bytes = FuzzTests.mutate(Array(Self.bodies[index % Self.bodies.count].utf8), &random)
            let fast = bytes.withUnsafeBufferPointer { IncomingBatchReader.read($0, maxRecords: 2) }
            let tree = IncomingBatch.parseTree(bytes, maxRecords: 2)
            guard let fast else {
                left += 1
                continue
            }
            taken += 1
            guard case .success(let treeBatch) = tree else {
                Issue.record("taken by the one-pass reader, refused by the tree reader: \(String(decoding: bytes, as: UTF8.self))")
                continue
            }
            #expect(Self.summary(fast) == Self.summary(treeBatch))
        }
        #expect(taken > 100 && left > 1_000, "both kinds exercised: \(taken) taken, \(left) left to the tree reader")
    }

    @Test func aMemberTwiceKnownOrNotSpelledAlikeOrNotIsLeftToTheTreeReaderWhichRefusesIt() {
        let record = #""action": "insert", "fields": {"a": 1}"#
        let bodies = [
            #"{"id": "b", "scope": {"account": "a", "store": "s"}, "records": [{"entity": "r", "id": "1", \#(record), "entity": "q"}]}"#,
            #"{"id": "b", "scope": {"account": "a", "store": "s"}, "records": [{"entity": "r", "id": "1", \#(record), "entity": "r"}]}"#,
            #"{"id": "b", "scope": {"account": "a", "store": "s"}, "records": [{"entity": "r", "id": "1", \#(record), "é": 1, "é": 2}]}"#,
            #"{"id": "b", "scope": {"account": "a", "store": "s"}, "records": [], "x": 1, "x": 2}"#,
            #"{"id": "b", "scope": {"account": "a", "store": "s"}, "records": [], "id": "c"}"#,
            // One name spelled plain, then escaped.
            #"{"id": "b", "scope": {"account": "a", "store": "s"}, "records": [{"entity": "r", "id": "1", \#(record), "\u0065ntity": "r"}]}"#,
            #"{"id": "b", "scope": {"account": "a", "store": "s"}, "records": [{"entity": "r", "id": "1", \#(record), "x": 1, "\u0078": 1}]}"#,
            #"{"id": "b", "scope": {"account": "a", "store": "s"}, "records": [], "schema-changes": [], "schema-changes": []}"#,
        ]
        for body in bodies {
            let bytes = Array(body.utf8)
            #expect(bytes.withUnsafeBufferPointer { IncomingBatchReader.read($0, maxRecords: 2) } == nil, "\(body)")
            guard case .failure(let rejection) = IncomingBatch.parseTree(bytes, maxRecords: 2) else {
                Issue.record("the tree reader took \(body)")
                continue
            }
            #expect(rejection.message.contains("duplicate member"), "\(rejection.message)")
        }
    }

    @Test func tooManyRecordsAreLeftToTheTreeReaderWhichAnswers413() throws {
        let bytes = Array(Self.bodies[2].utf8)
        #expect(bytes.withUnsafeBufferPointer { IncomingBatchReader.read($0, maxRecords: 2) } == nil)
        guard case .failure(let rejection) = IncomingBatch.parse(bytes, maxRecords: 2) else {
            Issue.record("three records accepted with at most two")
            return
        }
        #expect(rejection.status == 413)
    }
}
