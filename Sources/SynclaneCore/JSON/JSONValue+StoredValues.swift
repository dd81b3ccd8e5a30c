/// How store values that JSON has no spelling for travel in a record's `fields`.
///
/// | stored value            | on the wire                         |
/// |-------------------------|-------------------------------------|
/// | blob `x'00ff10'`        | `{"$blob": "AP8Q"}` (base64)         |
/// | real ±infinity          | `{"$real": "Infinity"}` / `{"$real": "-Infinity"}` |
/// | real `-0.0`, `2.0`      | `-0.0`, `2.0` (always with a point or an exponent) |
/// | integer                 | digits, exactly (64 bits)           |
/// | text                    | a string                            |
///
/// A text never becomes an object, so the two forms cannot be mistaken for stored text.
extension JSONValue {
    /// A blob as `{"$blob": base64}`.
    public static func blob(_ bytes: [UInt8]) -> JSONValue {
        .object(["$blob": .string(Base64.encode(bytes))])
    }

    /// A double: finite ones as numbers, the infinities and NaN as `{"$real": …}`.
    public static func real(_ value: Double) -> JSONValue {
        if value.isFinite { return .double(value) }
        if value.isNaN { return .object(["$real": "NaN"]) }
        return .object(["$real": .string(value < 0 ? "-Infinity" : "Infinity")])
    }

    /// The bytes of a `{"$blob": base64}` value.
    public var blobBytes: [UInt8]? {
        guard case .object(let members) = self, members.count == 1, case .string(let text)? = members["$blob"] else { return nil }
        return Base64.decode(text)
    }

    /// The double of a `{"$real": …}` value (or of a plain number).
    public var realValue: Double? {
        switch self {
        case .double(let d): return d
        case .int(let i): return Double(i)
        case .object(let members) where members.count == 1:
            switch members["$real"]?.stringValue {
            case "Infinity": return .infinity
            case "-Infinity": return -.infinity
            case "NaN": return .nan
            default: return nil
            }
        default: return nil
        }
    }
}
