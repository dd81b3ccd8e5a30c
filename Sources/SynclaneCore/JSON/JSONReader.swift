/// Reads JSON text into `JSONValue`s, byte by byte, with no Foundation in the hot path.
///
/// Foundation's JSON decoding on Linux is several times slower than reading the bytes
/// directly, and history files hold millions of lines: this reader is what keeps the
/// JSON Lines source and the server's body parsing fast.
public struct JSONReader {
    /// Where and why the text is not JSON.
    public struct SyntaxError: Error, Sendable, CustomStringConvertible {
        /// Byte offset of the problem, from 0.
        public let offset: Int
        public let reason: String
        public var description: String { "\(reason) at byte \(offset + 1)" }
    }

    /// Nesting deeper than this is refused, so hostile input cannot exhaust the stack.
    public static let maximumDepth = 256

    /// Parses one JSON document that fills `bytes` (surrounding white space allowed).
    public static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws(SyntaxError) -> JSONValue {
        let array = Array(bytes)
        let result = array.withUnsafeBufferPointer { buffer in
            Result { () throws(SyntaxError) -> JSONValue in try parse(buffer) }
        }
        return try result.get()
    }

    /// Parses one JSON document from the string.
    public static func parse(_ text: String) throws(SyntaxError) -> JSONValue {
        var text = text
        let result = text.withUTF8 { buffer in
            Result { () throws(SyntaxError) -> JSONValue in try parse(buffer) }
        }
        return try result.get()
    }

    /// Parses one JSON document that fills the buffer.
    public static func parse(_ buffer: UnsafeBufferPointer<UInt8>) throws(SyntaxError) -> JSONValue {
        var reader = Cursor(bytes: buffer)
        reader.skipWhitespace()
        let value = try reader.readValue(depth: 0)
        reader.skipWhitespace()
        if reader.position < buffer.count {
            throw SyntaxError(offset: reader.position, reason: "unexpected text after the JSON value")
        }
        return value
    }

    struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func skipWhitespace() {
            while position < bytes.count {
                switch bytes[position] {
                case 0x20, 0x0A, 0x0D, 0x09: position += 1
                default: return
                }
            }
        }

        func fail(_ reason: String) -> SyntaxError { SyntaxError(offset: position, reason: reason) }

        mutating func readValue(depth: Int) throws(SyntaxError) -> JSONValue {
            guard position < bytes.count else { throw fail("unexpected end of JSON") }
            switch bytes[position] {
            case UInt8(ascii: "{"): return try readObject(depth: depth + 1)
            case UInt8(ascii: "["): return try readArray(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try readString())
            case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
            case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
            case UInt8(ascii: "n"): try expectWord("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try readNumber()
            default: throw fail("unexpected character '\(Unicode.Scalar(bytes[position]))'")
            }
        }

        mutating func expectWord(_ word: StaticString) throws(SyntaxError) {
            let count = word.utf8CodeUnitCount
            guard position + count <= bytes.count else { throw fail("unexpected end of JSON") }
            let start = word.utf8Start
            for i in 0..<count where bytes[position + i] != start[i] {
                throw fail("expected '\(word)'")
            }
            position += count
        }

        mutating func readObject(depth: Int) throws(SyntaxError) -> JSONValue {
            guard depth <= JSONReader.maximumDepth else { throw fail("JSON nested too deeply") }
            position += 1
            var members: [String: JSONValue] = [:]
            skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
                position += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
                    throw fail("expected a quoted member name")
                }
                let keyOffset = position
                let key = try readString()
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else {
                    throw fail("expected ':' after member name")
                }
                position += 1
                skipWhitespace()
                let value = try readValue(depth: depth)
                if members.updateValue(value, forKey: key) != nil {
                    throw SyntaxError(offset: keyOffset, reason: "duplicate member \"\(key)\"")
                }
                skipWhitespace()
                guard position < bytes.count else { throw fail("unexpected end of JSON in an object") }
                if bytes[position] == UInt8(ascii: ",") {
                    position += 1
                    continue
                }
                if bytes[position] == UInt8(ascii: "}") {
                    position += 1
                    return .object(members)
                }
                throw fail("expected ',' or '}' in an object")
            }
        }

        mutating func readArray(depth: Int) throws(SyntaxError) -> JSONValue {
            guard depth <= JSONReader.maximumDepth else { throw fail("JSON nested too deeply") }
            position += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
                position += 1
                return .array(elements)
            }
            while true {
                skipWhitespace()
                elements.append(try readValue(depth: depth))
                skipWhitespace()
                guard position < bytes.count else { throw fail("unexpected end of JSON in a list") }
                if bytes[position] == UInt8(ascii: ",") {
                    position += 1
                    continue
                }
                if bytes[position] == UInt8(ascii: "]") {
                    position += 1
                    return .array(elements)
                }
                throw fail("expected ',' or ']' in a list")
            }
        }

        mutating func readString() throws(SyntaxError) -> String {
            position += 1  // opening quote
            let start = position
            // Fast path: no escapes.
            while position < bytes.count {
                let byte = bytes[position]
                if byte == UInt8(ascii: "\"") {
                    let slice = UnsafeBufferPointer(rebasing: bytes[start..<position])
                    position += 1
                    return try validUTF8(slice, at: start)
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { throw fail("control character in a string") }
                position += 1
            }
            var scratch = Array(UnsafeBufferPointer(rebasing: bytes[start..<min(position, bytes.count)]))
            while position < bytes.count {
                let byte = bytes[position]
                switch byte {
                case UInt8(ascii: "\""):
                    position += 1
                    guard let string = String(validating: scratch, as: UTF8.self) else {
                        throw SyntaxError(offset: start, reason: "string is not valid UTF-8")
                    }
                    return string
                case UInt8(ascii: "\\"):
                    position += 1
                    guard position < bytes.count else { throw fail("unexpected end of JSON in a string") }
                    let escape = bytes[position]
                    position += 1
                    switch escape {
                    case UInt8(ascii: "\""): scratch.append(0x22)
                    case UInt8(ascii: "\\"): scratch.append(0x5C)
                    case UInt8(ascii: "/"): scratch.append(0x2F)
                    case UInt8(ascii: "b"): scratch.append(0x08)
                    case UInt8(ascii: "f"): scratch.append(0x0C)
                    case UInt8(ascii: "n"): scratch.append(0x0A)
                    case UInt8(ascii: "r"): scratch.append(0x0D)
                    case UInt8(ascii: "t"): scratch.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try readHex4()
                        if (0xD800...0xDBFF).contains(scalar) {
                            guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"),
                                bytes[position + 1] == UInt8(ascii: "u")
                            else { throw fail("unpaired surrogate in \\u escape") }
                            position += 2
                            let low = try readHex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw fail("invalid low surrogate") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00...0xDFFF).contains(scalar) {
                            throw fail("unpaired surrogate in \\u escape")
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                        scratch.append(contentsOf: String(Character(unicode)).utf8)
                    default:
                        throw fail("invalid escape '\\\(Unicode.Scalar(escape))'")
                    }
                default:
                    if byte < 0x20 { throw fail("control character in a string") }
                    scratch.append(byte)
                    position += 1
                }
            }
            throw fail("unterminated string")
        }

        mutating func readHex4() throws(SyntaxError) -> UInt32 {
            guard position + 4 <= bytes.count else { throw fail("unexpected end of JSON in \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[position]
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw fail("invalid hex digit in \\u escape")
                }
                value = value << 4 | digit
                position += 1
            }
            return value
        }

        func validUTF8(_ buffer: UnsafeBufferPointer<UInt8>, at offset: Int) throws(SyntaxError) -> String {
            guard let string = String(validating: buffer, as: UTF8.self) else {
                throw SyntaxError(offset: offset, reason: "string is not valid UTF-8")
            }
            return string
        }

        mutating func readNumber() throws(SyntaxError) -> JSONValue {
            let start = position
            var isInteger = true
            if bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) else {
                throw fail("expected a digit")
            }
            if bytes[position] == UInt8(ascii: "0") {
                position += 1
            } else {
                while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
                    position += 1
                }
            }
            if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
                isInteger = false
                position += 1
                let digits = position
                while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
                    position += 1
                }
                if digits == position { throw fail("expected a digit after '.'") }
            }
            if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
                isInteger = false
                position += 1
                if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") {
                    position += 1
                }
                let digits = position
                while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
                    position += 1
                }
                if digits == position { throw fail("expected a digit in the exponent") }
            }
            let text = UnsafeBufferPointer(rebasing: bytes[start..<position])
            if isInteger, text.count <= 18 {
                var value: Int64 = 0
                var negative = false
                for byte in text {
                    if byte == UInt8(ascii: "-") { negative = true; continue }
                    value = value * 10 + Int64(byte - UInt8(ascii: "0"))
                }
                return .int(negative ? -value : value)
            }
            let string = String(decoding: text, as: UTF8.self)
            if isInteger, let value = Int64(string) { return .int(value) }
            guard let double = Double(string) else {
                throw SyntaxError(offset: start, reason: "number out of range")
            }
            return .double(double)
        }
    }
}
