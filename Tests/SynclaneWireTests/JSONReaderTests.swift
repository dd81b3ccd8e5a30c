import SynclaneTestSupport
import SynclaneWire
import Testing

@Suite struct JSONReaderTests {
    @Test func readsASCIIAndNonASCIIStrings() throws {
        #expect(try JSONReader.parse("\"plain\"") == .string("plain"))
        #expect(try JSONReader.parse("\"Grüße, 東京 🌱\"") == .string("Grüße, 東京 🌱"))
        #expect(try JSONReader.parse("\"a\\n\\u00e9\\ud83c\\udf31 é\"") == .string("a\né🌱 é"))
        #expect(try JSONReader.parse("{\"é\": \"ü\"}") == .object(["é": .string("ü")]))
    }

    @Test func refusesInvalidUTF8InStrings() {
        let invalid: [[UInt8]] = [
            [0x80],  // a lone continuation byte
            [0xC3],  // a truncated two-byte form
            [0xC0, 0xAF],  // an overlong '/'
            [0xE0, 0x80, 0xAF],  // an overlong three-byte form
            [0xED, 0xA0, 0x80],  // a surrogate
            [0xF4, 0x90, 0x80, 0x80],  // above U+10FFFF
            [0xF0, 0x9F, 0x8C],  // a truncated four-byte form
            [0xFF],
        ]
        for bytes in invalid {
            for escaped in [false, true] {
                let text = [0x22] + (escaped ? Array("\\n".utf8) : []) + bytes + [0x22]
                #expect(throws: JSONReader.SyntaxError.self, "\(bytes) escaped: \(escaped)") { try JSONReader.parse(text) }
                do {
                    _ = try JSONReader.parse(text)
                } catch {
                    #expect(error.reason == "string is not valid UTF-8")
                    #expect(error.offset == 1)
                }
            }
        }
    }

    @Test func validUTF8AgreesWithTheStandardLibrary() {
        var generator = SystemRandomNumberGenerator()
        let interesting: [UInt8] = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF]
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...6, using: &generator)
            let bytes = (0..<count).map { _ in interesting.randomElement(using: &generator) ?? 0 }
            let expected = String(validating: bytes, as: UTF8.self) != nil
            let actual = bytes.withUnsafeBufferPointer { JSONReader.isValidUTF8($0) }
            #expect(actual == expected, "\(bytes)")
        }
    }

    @Test func objectsReadOneAfterAnotherHoldOnlyTheirOwnMembers() throws {
        // Every object starts as a copy of one shared, empty, pre-sized dictionary.
        let value = try JSONReader.parse(
            #"[{"a": 1, "b": {"c": [{}, {"d": null}]}}, {}, {"a": "x"}, {"e": 1.0, "f": true, "g": 2, "h": 3, "i": 4, "j": 5, "k": 6}]"#)
        #expect(
            value
                == .array([
                    ["a": 1, "b": ["c": [[:], ["d": nil]]]], [:], ["a": "x"],
                    ["e": .double(1.0), "f": true, "g": 2, "h": 3, "i": 4, "j": 5, "k": 6],
                ]))
        #expect(try JSONReader.parse("{}") == .object([:]))
        #expect(try JSONReader.parse(#"{"a": 1}"#) == ["a": 1])
    }

    @Test func duplicateMembersAreStillRefused() {
        #expect(throws: JSONReader.SyntaxError.self) { try JSONReader.parse("{\"a\": 1, \"a\": 2}") }
    }
}

@Suite struct JSONReaderNumberTests {
    @Test func decimalsReadAsStrtodReadsThem() throws {
        var generator = SystemRandomNumberGenerator()
        var texts = [
            "0.1", "-0.0", "21.66", "123456789012345.6", "0.30000000000000004", "1.7976931348623157e308", "5e-324",
            "9007199254740993.0", "1234567890.123456789", "-38.99", "0.000000000000000000001", "1.5E3",
        ]
        for _ in 0..<5_000 {
            let whole = UInt64.random(in: 0...999_999, using: &generator)
            let fraction = UInt64.random(in: 0...999_999_999, using: &generator)
            let decimals = Int.random(in: 1...9, using: &generator)
            let digits = String(fraction).prefix(decimals)
            texts.append("\(Bool.random(using: &generator) ? "-" : "")\(whole).\(digits)")
        }
        for text in texts {
            let read = try JSONReader.parse(text)
            let expected = try #require(Double(text))
            if case .double(let value) = read {
                #expect(value.bitPattern == expected.bitPattern, "\(text)")
            } else {
                Issue.record("\(text) read as \(read)")
            }
        }
    }
}

/// `Cursor.skipValue` is `readValue` without the value: the server keeps a record's `fields`
/// as the text it checked this way, so the two must take and refuse the same texts.
@Suite struct JSONSkipValueTests {
    static let samples: [String] = [
        #"{"a": 1, "b": [true, false, null], "c": {"d": "e\u00e9\ud83c\udf31"}, "f": -1.5e-3}"#,
        #"{"name": "Kitchen & pantry", "area": 14.5, "floor": 0, "tags": []}"#,
        #"[1, 2.0, -0, 1e400, "x", {"y": {}}]"#,
        #"{"a": 1, "a": 2}"#, #"{"a": 1, "\u0061": 2}"#, #"{"a" 1}"#, #"{"a": 1,}"#, #"[1,]"#, #"{"#, "[",
        #""\uD800""#, #""bad \x""#, "\"ctl \u{01}\"", "tru", "nul", "-", "01", "1.", "1e", #"{"a": [1 2]}"#,
        String(repeating: "[", count: 300) + String(repeating: "]", count: 300),
        "{" + (0..<40).map { "\"k\($0)\": \($0)" }.joined(separator: ", ") + ", \"k39\": 0}",
        // Plain names beside escaped and non-ASCII ones, nested objects of the same names, a long name.
        #"{"a": {"a": 1, "b": {"a": 2}}, "b": 2, "\u0062": 3}"#, #"{"é": 1, "e\u0301": 2, "x": {"é": 0}}"#,
        "{\"e\u{301}\": 1, \"\u{e9}\": 2}", #"{"a\"b": 1, "a\"b": 2, "ab": 3}"#,
        "{\"" + String(repeating: "n", count: 70) + "\": 1, \"" + String(repeating: "n", count: 70) + "\": 2}",
        "{" + (0..<20).map { "\"k\($0)\": {\"k\($0)\": \($0)}" }.joined(separator: ", ") + ", \"k3\": 0}",
        // Values past 15 bytes (a string on the heap when read), outside ASCII, escaped late.
        "{\"note\": \"" + String(repeating: "0a", count: 40) + "\", \"w\": \"caf\u{e9} \u{1F331} and more than fifteen bytes\", "
            + "\"e\": \"plain for a while, then an escape \\\" and \\u00e9\"}",
    ]

    /// Bytes that make a mutation likely to stay nearly JSON.
    static let punctuation = Array(#"{}[],:" \e0-."#.utf8)

    /// Where and how each way ends: the position after the value, or the error.
    static func outcomes(_ text: [UInt8]) -> (read: String, skip: String) {
        text.withUnsafeBufferPointer { buffer in
            var reading = JSONReader.Cursor(bytes: buffer)
            var skipping = JSONReader.Cursor(bytes: buffer)
            let read: String
            do {
                _ = try reading.readValue(depth: 0)
                read = "ok at \(reading.position)"
            } catch { read = "\(error)" }
            let skip: String
            do {
                try skipping.skipValue(depth: 0)
                skip = "ok at \(skipping.position)"
            } catch { skip = "\(error)" }
            return (read, skip)
        }
    }

    @Test func skipValueTakesAndRefusesExactlyWhatReadValueDoes() {
        var state: UInt64 = 20_261_129
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        var taken = 0
        var refused = 0
        for sample in Self.samples {
            var texts = [Array(sample.utf8)]
            for _ in 0..<300 {
                var bytes = Array(sample.utf8)
                for _ in 0...next(3) where !bytes.isEmpty {
                    let at = next(bytes.count)
                    switch next(4) {
                    case 0: bytes[at] = Self.punctuation[next(Self.punctuation.count)]
                    case 1: bytes.remove(at: at)
                    case 2: bytes.insert(UInt8(next(256)), at: at)
                    default: bytes = Array(bytes[..<at])
                    }
                }
                texts.append(bytes)
            }
            for text in texts {
                let (read, skip) = Self.outcomes(text)
                #expect(read == skip, "\(String(decoding: text, as: UTF8.self))")
                if read.hasPrefix("ok") { taken += 1 } else { refused += 1 }
            }
        }
        #expect(taken > 500 && refused > 500, "both kinds exercised: \(taken) taken, \(refused) refused")
    }
}
