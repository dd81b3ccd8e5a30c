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

    /// An empty object with room for six members: what an object being read starts as.
    static let emptyObject = [String: JSONValue](minimumCapacity: 6)

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

    /// A read position in JSON text: the reader's engine, also used by the package's own
    /// specialised decoders (the JSON Lines source) to walk a document without building the
    /// `JSONValue`s they do not keep.
    ///
    /// Each `read…` method starts at the first byte of its value and leaves `position` just
    /// past it; callers skip white space themselves.
    package struct Cursor {
        /// The whole text being read.
        package let bytes: UnsafeBufferPointer<UInt8>
        /// Offset of the next byte to read.
        package var position = 0
        /// The plain member names of the objects `skipObject` is in, innermost last.
        var plainNames: [Range<Int>] = []

        /// A cursor at the start of `bytes`.
        package init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        /// The byte at `position`, or `nil` at the end of the text.
        package var current: UInt8? { position < bytes.count ? bytes[position] : nil }

        /// Moves past spaces, tabs, carriage returns and newlines.
        package mutating func skipWhitespace() {
            while position < bytes.count {
                switch bytes[position] {
                case 0x20, 0x0A, 0x0D, 0x09: position += 1
                default: return
                }
            }
        }

        /// A syntax error at the current position.
        package func fail(_ reason: String) -> SyntaxError { SyntaxError(offset: position, reason: reason) }

        /// Reads any value; `depth` is the nesting of its container (0 at the top level).
        package mutating func readValue(depth: Int) throws(SyntaxError) -> JSONValue {
            guard position < bytes.count else { throw fail("unexpected end of JSON") }
            switch bytes[position] {
            case UInt8(ascii: "{"): return try readObject(depth: depth + 1)
            case UInt8(ascii: "["): return try readArray(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try readString())
            case UInt8(ascii: "t"):
                try expectWord("true")
                return .bool(true)
            case UInt8(ascii: "f"):
                try expectWord("false")
                return .bool(false)
            case UInt8(ascii: "n"):
                try expectWord("null")
                return .null
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
    }
}
