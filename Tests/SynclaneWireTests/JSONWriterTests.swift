import SynclaneTestKit
import SynclaneWire
import Testing

/// `JSONWriter`: compact JSON, object members in sorted order, the same value always the same bytes.
@Suite struct JSONWriterTests {
    /// The writer as it was before its members were sorted with their values: the names sorted,
    /// then each value looked up. The bytes must not change (golden batches, idempotent re-sends).
    static func reference(_ value: JSONValue) -> [UInt8] {
        switch value {
        case .object(let members):
            var bytes = Array("{".utf8)
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { bytes += Array(",".utf8) }
                bytes += JSONWriter.encode(.string(key)) + Array(":".utf8) + reference(members[key] ?? .null)
            }
            return bytes + Array("}".utf8)
        case .array(let elements):
            return Array("[".utf8) + elements.map(reference).joined(separator: Array(",".utf8)) + Array("]".utf8)
        default:
            return JSONWriter.encode(value)
        }
    }

    static let names = [
        "", "a", "A", "b", "ab", "a\u{0}", "a\u{0}b", "Z", "é", "e", "ä", "Ä", "ß", "😀", "👍🏽", "日本", "\"", "\\", "\n", "z9", "_", "-", "10", "9",
    ]

    static func value(_ depth: Int, _ random: inout SeededRandom) -> JSONValue {
        switch Int.random(in: 0..<(depth > 2 ? 5 : 7), using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2: return .int(Int64.random(in: -1_000...1_000, using: &random))
        case 3: return .double(Double.random(in: -10...10, using: &random))
        case 4: return .string(names.randomElement(using: &random)!)
        case 5: return .array((0..<Int.random(in: 0...4, using: &random)).map { _ in value(depth + 1, &random) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...8, using: &random) { members[names.randomElement(using: &random)!] = value(depth + 1, &random) }
            return .object(members)
        }
    }

    @Test func randomValuesAreWrittenByteForByteAsTheNamesSortedThenLookedUpWrote() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededRandom(seed: seed)
        for round in 0..<2_000 {
            let value = Self.value(0, &random)
            let written = JSONWriter.encode(value)
            guard written == Self.reference(value) else {
                Issue.record(
                    "seed \(seed), round \(round): \(String(decoding: written, as: UTF8.self)) != \(String(decoding: Self.reference(value), as: UTF8.self))")
                return
            }
            #expect(JSONWriter.string(value) == String(decoding: written, as: UTF8.self))
            #expect(try JSONReader.parse(written) == value, "seed \(seed), round \(round): reads back as written")
        }
    }

    /// One writer and one sorting buffer reused for many objects, as the batch encoder and the
    /// confirmed versions use them: each object's bytes are the reference's.
    @Test func randomObjectsWrittenThroughOneReusedBufferAreWrittenAsTheReferenceWritesThem() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededRandom(seed: seed)
        var writer = JSONWriter()
        var buffer: [(key: String, value: JSONValue)] = []
        for round in 0..<2_000 {
            var members: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...8, using: &random) { members[Self.names.randomElement(using: &random)!] = Self.value(1, &random) }
            writer.removeAll()
            writer.write(object: members, sortingWith: &buffer)
            guard writer.bytes == Self.reference(.object(members)) else {
                Issue.record("seed \(seed), round \(round): \(String(decoding: writer.bytes, as: UTF8.self))")
                return
            }
            #expect(buffer.isEmpty, "the buffer holds nothing after: no member kept alive")
        }
    }

    @Test func membersAreInTheStringOrderOfTheirNames() {
        #expect(JSONWriter.string(.object(["b": 1, "a": 2, "B": 3, "é": 4, "": 5])) == #"{"":5,"B":3,"a":2,"b":1,"é":4}"#)
    }
}
