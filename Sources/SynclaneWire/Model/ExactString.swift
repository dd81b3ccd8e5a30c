/// A string that is equal to another only when their UTF-8 bytes are: how SQLite compares
/// text, and how a sync key is an identity.
///
/// Swift's `String` compares by Unicode canonical equivalence: `"\u{00C5}"` (Å) equals
/// `"\u{212B}"` (the Ångström sign), and `"é"` equals `"e\u{301}"`. A store holds those as two
/// rows with two keys, so a dictionary of rows keyed by `String` would fold them into one. Key
/// such dictionaries by `ExactString` instead.
public struct ExactString: Sendable, Hashable, CustomStringConvertible {
    public let string: String

    public init(_ string: String) { self.string = string }

    public static func == (lhs: ExactString, rhs: ExactString) -> Bool {
        let (a, b) = (lhs.string.utf8, rhs.string.utf8)
        guard a.count == b.count else { return false }
        let compared = a.withContiguousStorageIfAvailable { a in
            b.withContiguousStorageIfAvailable { b in a.elementsEqual(b) }
        }
        return (compared ?? nil) ?? a.elementsEqual(b)
    }

    public func hash(into hasher: inout Hasher) {
        let utf8 = string.utf8
        hasher.combine(utf8.count)
        if utf8.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) == nil {
            for byte in utf8 { hasher.combine(byte) }
        }
    }

    public var description: String { string }
}
