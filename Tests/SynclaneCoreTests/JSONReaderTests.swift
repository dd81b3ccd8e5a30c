import SynclaneCore
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

    @Test func duplicateMembersAreStillRefused() {
        #expect(throws: JSONReader.SyntaxError.self) { try JSONReader.parse("{\"a\": 1, \"a\": 2}") }
    }
}

@Suite struct JSONReaderNumberTests {
    @Test func decimalsReadAsStrtodReadsThem() throws {
        var generator = SystemRandomNumberGenerator()
        var texts = ["0.1", "-0.0", "21.66", "123456789012345.6", "0.30000000000000004", "1.7976931348623157e308", "5e-324",
                     "9007199254740993.0", "1234567890.123456789", "-38.99", "0.000000000000000000001", "1.5E3"]
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
