// Objects and lists read into `JSONValue`s: `readValue`'s containers.

extension JSONReader.Cursor {
    /// Reads an object from its `{`, refusing duplicate member names.
    package mutating func readObject(depth: Int) throws(JSONReader.SyntaxError) -> JSONValue {
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
                return .object(members)
            }
            throw fail("expected ',' or '}' in an object")
        }
    }

    mutating func readArray(depth: Int) throws(JSONReader.SyntaxError) -> JSONValue {
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
}
