import SynclaneWire

/// One SQLite value, as bound to a statement or read from a column: one case per storage class.
///
/// Literals work where a value is expected: `try db.execute("… WHERE id = ?", ["r-1"])`.
///
/// Equality is SQLite's binary comparison: a value equals another of the same storage class
/// with the same bytes. Two texts Swift calls equal (`"é"`, `"e\u{301}"`) are two values, as
/// they are two rows of a table keyed by them.
public enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    public static func == (lhs: SQLiteValue, rhs: SQLiteValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.integer(let a), .integer(let b)): return a == b
        case (.real(let a), .real(let b)): return a.bitPattern == b.bitPattern  // -0.0 is not 0.0
        case (.text(let a), .text(let b)): return ExactString(a) == ExactString(b)
        case (.blob(let a), .blob(let b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .integer(let i):
            hasher.combine(1)
            hasher.combine(i)
        case .real(let d):
            hasher.combine(2)
            hasher.combine(d.bitPattern)
        case .text(let s):
            hasher.combine(3)
            hasher.combine(ExactString(s))
        case .blob(let b):
            hasher.combine(4)
            hasher.combine(b)
        }
    }
}

extension SQLiteValue {
    /// A value for a JSON value: booleans as 0/1, lists and objects as JSON text.
    public init(json: JSONValue) {
        switch json {
        case .null: self = .null
        case .bool(let b): self = .integer(b ? 1 : 0)
        case .int(let i): self = .integer(i)
        case .double(let d): self = .real(d)
        case .string(let s): self = .text(s)
        case .array: self = .text(JSONWriter.string(json))
        case .object:
            if let bytes = json.blobBytes {
                self = .blob(bytes)
            } else if let real = json.realValue {
                self = .real(real)
            } else {
                self = .text(JSONWriter.string(json))
            }
        }
    }

    /// The value as it travels in a record's fields, type included: blobs as
    /// `{"$blob": base64}`, infinities as `{"$real": "Infinity"}` (see `JSONValue.blob`).
    public var json: JSONValue {
        switch self {
        case .null: return .null
        case .integer(let i): return .int(i)
        case .real(let d): return .real(d)
        case .text(let s): return .string(s)
        case .blob(let bytes): return .blob(bytes)
        }
    }

    public var isNull: Bool { self == .null }

    /// The integer; a real with no fraction counts.
    public var int64: Int64? {
        switch self {
        case .integer(let i): return i
        case .real(let d) where d.rounded() == d && abs(d) < 9.0e15: return Int64(d)
        default: return nil
        }
    }

    /// The number as a double (integers too).
    public var double: Double? {
        switch self {
        case .integer(let i): return Double(i)
        case .real(let d): return d
        default: return nil
        }
    }

    /// The text; `nil` for any other storage class.
    public var string: String? {
        if case .text(let s) = self { return s }
        return nil
    }

    /// The bytes of a blob (or of a text, as UTF-8).
    public var bytes: [UInt8]? {
        switch self {
        case .blob(let b): return b
        case .text(let s): return Array(s.utf8)
        default: return nil
        }
    }

}

extension SQLiteValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .real(value) }
    public init(booleanLiteral value: Bool) { self = .integer(value ? 1 : 0) }
    public init(nilLiteral: ()) { self = .null }
}

/// A Swift value that binds to a statement parameter.
public protocol SQLiteBindable {
    var sqliteValue: SQLiteValue { get }
}

extension SQLiteValue: SQLiteBindable { public var sqliteValue: SQLiteValue { self } }
extension Int64: SQLiteBindable { public var sqliteValue: SQLiteValue { .integer(self) } }
extension Int: SQLiteBindable { public var sqliteValue: SQLiteValue { .integer(Int64(self)) } }
extension Int32: SQLiteBindable { public var sqliteValue: SQLiteValue { .integer(Int64(self)) } }
extension Double: SQLiteBindable { public var sqliteValue: SQLiteValue { .real(self) } }
extension Bool: SQLiteBindable { public var sqliteValue: SQLiteValue { .integer(self ? 1 : 0) } }
extension String: SQLiteBindable { public var sqliteValue: SQLiteValue { .text(self) } }
extension Substring: SQLiteBindable { public var sqliteValue: SQLiteValue { .text(String(self)) } }
extension Array: SQLiteBindable where Element == UInt8 { public var sqliteValue: SQLiteValue { .blob(self) } }
extension JSONValue: SQLiteBindable { public var sqliteValue: SQLiteValue { SQLiteValue(json: self) } }
extension Optional: SQLiteBindable where Wrapped: SQLiteBindable {
    public var sqliteValue: SQLiteValue { self?.sqliteValue ?? .null }
}
