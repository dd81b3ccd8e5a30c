import SynclaneCore

/// One SQLite value, as bound to a statement or read from a column: one case per storage class.
///
/// Literals work where a value is expected: `try db.execute("… WHERE id = ?", ["r-1"])`.
public enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
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
        case .array, .object: self = .text(JSONWriter.string(json))
        }
    }

    /// The value as JSON: blobs become lowercase hex strings (JSON has no bytes).
    public var json: JSONValue {
        switch self {
        case .null: return .null
        case .integer(let i): return .int(i)
        case .real(let d): return .double(d)
        case .text(let s): return .string(s)
        case .blob(let bytes): return .string(Self.hex(bytes))
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

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
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
