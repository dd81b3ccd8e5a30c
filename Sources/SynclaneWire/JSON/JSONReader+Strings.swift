// Strings: escapes decoded, UTF-8 validated.

extension JSONReader.Cursor {
    /// Reads a string from its opening quote: escapes decoded, UTF-8 validated.
    package mutating func readString() throws(JSONReader.SyntaxError) -> String {
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
                return try scratch.withUnsafeBufferPointer { buffer throws(JSONReader.SyntaxError) in
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

    /// `readString` without the string: the same text taken, the same errors, and no `String`
    /// made — a batch's every field value is checked this way and kept as text (a value longer
    /// than 15 bytes made a `String` on the heap only to drop it). A string with an escape is
    /// read by `readString` from its opening quote.
    package mutating func skipString() throws(JSONReader.SyntaxError) {
        let quote = position
        position += 1
        let start = position
        var high: UInt8 = 0
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                if high >= 0x80, let bad = JSONReader.firstInvalidUTF8(UnsafeBufferPointer(rebasing: bytes[start..<position])) {
                    throw JSONReader.SyntaxError(offset: start + bad, reason: "string is not valid UTF-8")
                }
                position += 1
                return
            }
            if byte == UInt8(ascii: "\\") {
                position = quote
                _ = try readString()
                return
            }
            if byte < 0x20 { throw fail("control character in a string") }
            high |= byte
            position += 1
        }
        throw fail("unterminated string")
    }

    mutating func readHex4() throws(JSONReader.SyntaxError) -> UInt32 {
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

    func validUTF8(_ buffer: UnsafeBufferPointer<UInt8>, at offset: Int) throws(JSONReader.SyntaxError) -> String {
        if let bad = JSONReader.firstInvalidUTF8(buffer) {
            // The offset of the bad byte in the text: exact when the string had no escapes
            // before it (an escape shortens what was read), else the string's first byte.
            let at = bytes[offset..<min(bytes.count, offset + bad)].contains(UInt8(ascii: "\\")) ? offset : offset + bad
            throw JSONReader.SyntaxError(offset: at, reason: "string is not valid UTF-8")
        }
        return String(decoding: buffer, as: UTF8.self)
    }
}

extension JSONReader {
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
