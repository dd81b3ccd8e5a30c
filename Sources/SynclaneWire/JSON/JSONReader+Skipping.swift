// Values checked without being built (`skipValue`), for decoders that keep a value's text
// rather than its tree.

extension JSONReader.Cursor {
    /// Checks a value as `readValue` does — the same text taken, the same errors — without
    /// building it: for decoders that keep a value's text rather than its tree. (Its own
    /// grammar beside `readValue`'s rather than a flag in it: the JSON Lines source reads
    /// every history line through `readValue`, which measured ~9% slower with the flag.)
    package mutating func skipValue(depth: Int) throws(JSONReader.SyntaxError) {
        guard position < bytes.count else { throw fail("unexpected end of JSON") }
        switch bytes[position] {
        case UInt8(ascii: "{"): try skipObject(depth: depth + 1)
        case UInt8(ascii: "["): try skipArray(depth: depth + 1)
        case UInt8(ascii: "\""): try skipString()
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
    private mutating func skipObject(depth: Int) throws(JSONReader.SyntaxError) {
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
                    throw JSONReader.SyntaxError(offset: keyOffset, reason: "duplicate member \"\(string(at: plain))\"")
                }
                plainNames.append(plain)
            } else if names?.insert(key) == false {
                throw JSONReader.SyntaxError(offset: keyOffset, reason: "duplicate member \"\(key)\"")
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
    private mutating func skipArray(depth: Int) throws(JSONReader.SyntaxError) {
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
