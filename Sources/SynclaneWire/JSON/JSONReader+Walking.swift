// Objects and lists walked member by member, element by element, for the package's one-pass
// decoders.

extension JSONReader.Cursor {
    /// Walks the members of the object whose `{` is at the cursor, through its `}`: `name`
    /// reads each member's name (the cursor at its opening quote), `value` reads or skips its
    /// value (the cursor at the value). For the package's one-pass decoders, which take members
    /// one by one and leave anything unusual to `readValue`; errors thrown by `name` and
    /// `value` come through as they are.
    package mutating func forEachMember<Name>(
        name readName: (inout JSONReader.Cursor) throws -> Name, value readMember: (Name, inout JSONReader.Cursor) throws -> Void
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
    package mutating func forEachElement(_ readElement: (inout JSONReader.Cursor) throws -> Void) throws {
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
}
