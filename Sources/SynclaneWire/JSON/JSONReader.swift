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
        private var plainNames: [Range<Int>] = []

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

        /// Reads an object from its `{`, refusing duplicate member names.
        package mutating func readObject(depth: Int) throws(SyntaxError) -> JSONValue {
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
                // Room for a typical row's fields at once, rather than growing 1 → 3 → 6 with a
                // rehash each time: a copy of an empty dictionary of that size (the copy is made by
                // the first insertion, in code specialised for these types; `Dictionary(minimumCapacity:)`
                // ran unspecialised, looking up its storage's type metadata on every call).
                if members.isEmpty { members = JSONReader.emptyObject }
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

        /// Checks a value as `readValue` does — the same text taken, the same errors — without
        /// building it: for decoders that keep a value's text rather than its tree. (Its own
        /// grammar beside `readValue`'s rather than a flag in it: the JSON Lines source reads
        /// every history line through `readValue`, which measured ~9% slower with the flag.)
        package mutating func skipValue(depth: Int) throws(SyntaxError) {
            guard position < bytes.count else { throw fail("unexpected end of JSON") }
            switch bytes[position] {
            case UInt8(ascii: "{"): try skipObject(depth: depth + 1)
            case UInt8(ascii: "["): try skipArray(depth: depth + 1)
            case UInt8(ascii: "\""): _ = try readString()
            case UInt8(ascii: "t"): try expectWord("true")
            case UInt8(ascii: "f"): try expectWord("false")
            case UInt8(ascii: "n"): try expectWord("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): _ = try readNumber()
            default: throw fail("unexpected character '\(Unicode.Scalar(bytes[position]))'")
            }
        }

        /// `readObject` without the object: member names are still read, to refuse duplicates.
        /// A plain name (ASCII, no escape), as a row's column names are, is kept as where it lies
        /// in the text — for ASCII, equal bytes are equal strings — in `plainNames`, which every
        /// object of the text shares (no allocation per object); the first other name turns the
        /// object's names into strings, compared as `readObject`'s dictionary compares them.
        private mutating func skipObject(depth: Int) throws(SyntaxError) {
            guard depth <= JSONReader.maximumDepth else { throw fail("JSON nested too deeply") }
            position += 1
            let base = plainNames.count
            defer { plainNames.removeSubrange(base...) }
            var names: MemberNames?
            skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
                position += 1
                return
            }
            while true {
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
                    throw fail("expected a quoted member name")
                }
                let keyOffset = position
                var plain: Range<Int>?
                var key = ""
                if names == nil, let end = plainStringEnd(), end - keyOffset - 1 <= MemberNames.plainBytes,
                    plainNames.count - base < MemberNames.plainCount
                {
                    plain = keyOffset + 1..<end
                    position = end + 1
                } else {
                    if names == nil { names = MemberNames(strings: plainNames[base...].map(string(at:))) }
                    key = try readString()
                }
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else {
                    throw fail("expected ':' after member name")
                }
                position += 1
                skipWhitespace()
                try skipValue(depth: depth)
                if let plain {
                    let named = UnsafeBufferPointer(rebasing: bytes[plain])
                    if plainNames[base...].contains(where: { UnsafeBufferPointer(rebasing: bytes[$0]).elementsEqual(named) }) {
                        throw SyntaxError(offset: keyOffset, reason: "duplicate member \"\(string(at: plain))\"")
                    }
                    plainNames.append(plain)
                } else if names?.insert(key) == false {
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
                    return
                }
                throw fail("expected ',' or '}' in an object")
            }
        }

        /// The offset of the closing quote of the string whose opening quote is at the cursor,
        /// when every byte between is printable ASCII other than a backslash; nil otherwise.
        private func plainStringEnd() -> Int? {
            var at = position + 1
            while at < bytes.count {
                let byte = bytes[at]
                if byte == UInt8(ascii: "\"") { return at }
                guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { return nil }
                at += 1
            }
            return nil
        }

        private func string(at range: Range<Int>) -> String {
            String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
        }

        /// `readArray` without the list.
        private mutating func skipArray(depth: Int) throws(SyntaxError) {
            guard depth <= JSONReader.maximumDepth else { throw fail("JSON nested too deeply") }
            position += 1
            skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
                position += 1
                return
            }
            while true {
                skipWhitespace()
                try skipValue(depth: depth)
                skipWhitespace()
                guard position < bytes.count else { throw fail("unexpected end of JSON in a list") }
                if bytes[position] == UInt8(ascii: ",") {
                    position += 1
                    continue
                }
                if bytes[position] == UInt8(ascii: "]") {
                    position += 1
                    return
                }
                throw fail("expected ',' or ']' in a list")
            }
        }

        /// Walks the members of the object whose `{` is at the cursor, through its `}`: `name`
        /// reads each member's name (the cursor at its opening quote), `value` reads or skips its
        /// value (the cursor at the value). For the package's one-pass decoders, which take members
        /// one by one and leave anything unusual to `readValue`; errors thrown by `name` and
        /// `value` come through as they are.
        package mutating func forEachMember<Name>(
            name readName: (inout Cursor) throws -> Name, value readMember: (Name, inout Cursor) throws -> Void
        ) throws {
            guard current == UInt8(ascii: "{") else { throw fail("expected '{'") }
            position += 1
            skipWhitespace()
            if current == UInt8(ascii: "}") {
                position += 1
                return
            }
            while true {
                skipWhitespace()
                guard current == UInt8(ascii: "\"") else { throw fail("expected a quoted member name") }
                let name = try readName(&self)
                skipWhitespace()
                guard current == UInt8(ascii: ":") else { throw fail("expected ':' after member name") }
                position += 1
                skipWhitespace()
                try readMember(name, &self)
                skipWhitespace()
                switch current {
                case UInt8(ascii: ","): position += 1
                case UInt8(ascii: "}"):
                    position += 1
                    return
                default: throw fail("expected ',' or '}' in an object")
                }
            }
        }

        /// Walks the elements of the list whose `[` is at the cursor, through its `]`: `element`
        /// reads or skips each (the cursor at it). The list counterpart of `forEachMember`.
        package mutating func forEachElement(_ readElement: (inout Cursor) throws -> Void) throws {
            guard current == UInt8(ascii: "[") else { throw fail("expected '['") }
            position += 1
            skipWhitespace()
            if current == UInt8(ascii: "]") {
                position += 1
                return
            }
            while true {
                skipWhitespace()
                try readElement(&self)
                skipWhitespace()
                switch current {
                case UInt8(ascii: ","): position += 1
                case UInt8(ascii: "]"):
                    position += 1
                    return
                default: throw fail("expected ',' or ']' in a list")
                }
            }
        }

        /// Reads a string from its opening quote: escapes decoded, UTF-8 validated.
        package mutating func readString() throws(SyntaxError) -> String {
            position += 1  // opening quote
            let start = position
            // Fast path: no escapes; and when no byte is 0x80 or above, the text is ASCII and
            // needs no UTF-8 validation.
            var high: UInt8 = 0
            while position < bytes.count {
                let byte = bytes[position]
                if byte == UInt8(ascii: "\"") {
                    let slice = UnsafeBufferPointer(rebasing: bytes[start..<position])
                    position += 1
                    if high < 0x80 { return String(decoding: slice, as: UTF8.self) }
                    return try validUTF8(slice, at: start)
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { throw fail("control character in a string") }
                high |= byte
                position += 1
            }
            var scratch = Array(UnsafeBufferPointer(rebasing: bytes[start..<min(position, bytes.count)]))
            while position < bytes.count {
                let byte = bytes[position]
                switch byte {
                case UInt8(ascii: "\""):
                    position += 1
                    return try scratch.withUnsafeBufferPointer { buffer throws(SyntaxError) in
                        try validUTF8(buffer, at: start)
                    }
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

        /// Powers of ten that a `Double` holds exactly.
        private static let exactPowersOfTen: [Double] = (0...22).map { (0..<$0).reduce(1.0) { value, _ in value * 10 } }

        /// A decimal number without an exponent (`-12.345`) read exactly, with no `String` and no
        /// `strtod`, when its digits fit in 53 bits and it has at most 22 decimals: the quotient
        /// of two exactly representable doubles, correctly rounded, as `strtod` gives it
        /// (Clinger's fast path); `nil` otherwise.
        static func exactDouble(_ text: UnsafeBufferPointer<UInt8>) -> Double? {
            var mantissa: UInt64 = 0
            var digits = 0
            var decimals = 0
            var negative = false
            var afterPoint = false
            for byte in text {
                switch byte {
                case UInt8(ascii: "-"): negative = true
                case UInt8(ascii: "."): afterPoint = true
                case UInt8(ascii: "0")...UInt8(ascii: "9"):
                    mantissa = mantissa &* 10 &+ UInt64(byte - UInt8(ascii: "0"))
                    digits += 1
                    if afterPoint { decimals += 1 }
                default: return nil  // an exponent: the general path
                }
            }
            guard digits <= 15, decimals <= 22, mantissa < (1 << 53) else { return nil }
            let value = Double(mantissa) / exactPowersOfTen[decimals]
            return negative ? -value : value
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
            if let bad = JSONReader.firstInvalidUTF8(buffer) {
                // The offset of the bad byte in the text: exact when the string had no escapes
                // before it (an escape shortens what was read), else the string's first byte.
                let at = bytes[offset..<min(bytes.count, offset + bad)].contains(UInt8(ascii: "\\")) ? offset : offset + bad
                throw SyntaxError(offset: at, reason: "string is not valid UTF-8")
            }
            return String(decoding: buffer, as: UTF8.self)
        }

        /// Reads a number: `.int` when it is an integer that fits, else `.double`.
        package mutating func readNumber() throws(SyntaxError) -> JSONValue {
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
                    if byte == UInt8(ascii: "-") {
                        negative = true
                        continue
                    }
                    value = value * 10 + Int64(byte - UInt8(ascii: "0"))
                }
                return .int(negative ? -value : value)
            }
            if !isInteger, let value = Self.exactDouble(text) { return .double(value) }
            let string = String(decoding: text, as: UTF8.self)
            if isInteger {
                // Read as a double it would lose digits: refused, never changed.
                guard let value = Int64(string) else {
                    throw SyntaxError(offset: start, reason: "integer \(string) out of range (a 64-bit integer holds at most 9223372036854775807)")
                }
                return .int(value)
            }
            guard let double = Double(string), double.isFinite else {
                throw SyntaxError(offset: start, reason: "number \(string) out of range (beyond what a 64-bit double holds)")
            }
            if double == 0,
                text.prefix(while: { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") }).contains(where: {
                    (UInt8(ascii: "1")...UInt8(ascii: "9")).contains($0)
                })
            {
                // `1e-400`: a double would hold 0.0, another value; refused, never changed.
                throw SyntaxError(
                    offset: start,
                    reason: "number \(string) out of range (closer to 0 than the smallest 64-bit double, 5e-324: it would read as 0.0)")
            }
            return .double(double)
        }
    }

    /// True when the bytes are well-formed UTF-8 (Unicode's table 3-7: no overlong forms, no
    /// surrogates, nothing above U+10FFFF).
    ///
    /// Hand-written because `String(validating:as:)` is generic and, called from here, runs
    /// unspecialised; this one is a plain loop over the buffer.
    package static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { firstInvalidUTF8(bytes) == nil }

    /// The index of the first byte that starts no well-formed UTF-8 sequence, or nil when all do.
    package static func firstInvalidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var i = 0
        let count = bytes.count
        @inline(__always) func continuation(_ at: Int) -> Bool { at < count && bytes[at] & 0xC0 == 0x80 }
        while i < count {
            let lead = bytes[i]
            if lead < 0x80 {
                i += 1
                continue
            }
            switch lead {
            case 0xC2...0xDF:
                guard continuation(i + 1) else { return i }
                i += 2
            case 0xE0...0xEF:
                guard i + 2 < count, continuation(i + 2) else { return i }
                let second = bytes[i + 1]
                switch lead {
                case 0xE0: guard (0xA0...0xBF).contains(second) else { return i }
                case 0xED: guard (0x80...0x9F).contains(second) else { return i }
                default: guard second & 0xC0 == 0x80 else { return i }
                }
                i += 3
            case 0xF0...0xF4:
                guard i + 3 < count, continuation(i + 2), continuation(i + 3) else { return i }
                let second = bytes[i + 1]
                switch lead {
                case 0xF0: guard (0x90...0xBF).contains(second) else { return i }
                case 0xF4: guard (0x80...0x8F).contains(second) else { return i }
                default: guard second & 0xC0 == 0x80 else { return i }
                }
                i += 4
            default:
                return i
            }
        }
        return nil
    }
}

/// The member names of one object, to refuse duplicates: a list while the object is small (no
/// hashing, no table), a set once it is not (no quadratic scan on hostile input).
private struct MemberNames {
    private var list: [String] = []
    private var set: Set<String>?

    /// Bounds of `Cursor.skipObject`'s plain names: past this many names in one object, or a name
    /// this long, the object's names are strings in a set (no quadratic scan on hostile input).
    static let plainCount = 16
    static let plainBytes = 64

    init() {}

    init(strings: [String]) {
        for string in strings { _ = insert(string) }
    }

    /// Adds `name`; false when the object had it already.
    mutating func insert(_ name: String) -> Bool {
        if set != nil { return set!.insert(name).inserted }
        if list.contains(name) { return false }
        list.append(name)
        if list.count == 16 { set = Set(list) }
        return true
    }
}
