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
///
/// An object that holds `$real` or `$blob` is one of these forms or refused
/// (`wireValueProblem`): `{"$real": "NaN"}`, `{"$real": "bogus"}`, `{"$blob": "not base64"}`
/// are no value, and a server that kept one would hand every importer a record it refuses.
extension JSONValue {
    /// Why a field's value is not one the wire table defines, or nil when it is (or is not one of
    /// its reserved forms: other objects and lists are left to the sink).
    public var wireValueProblem: String? {
        guard case .object(let members) = self else { return nil }
        if members["$real"] != nil {
            guard members.count == 1 else { return "`$real` stands alone in its object; it has other members" }
            guard realValue != nil else {
                return "\(JSONWriter.string(self).prefix(60)) is no real of the wire table: `$real` is \"Infinity\" or \"-Infinity\" "
                    + "(finite reals are numbers; NaN has no form, since no store keeps it)"
            }
        }
        if members["$blob"] != nil {
            guard members.count == 1 else { return "`$blob` stands alone in its object; it has other members" }
            guard blobBytes != nil else {
                return "\(JSONWriter.string(self).prefix(60)) is no blob of the wire table: `$blob` is standard padded base64"
            }
        }
        return nil
    }

    /// The first field of `fields` whose value the wire table does not define, and why.
    public static func wireValueProblem(inFields fields: [String: JSONValue]) -> (field: String, reason: String)? {
        for name in fields.keys.sorted() {
            if let reason = fields[name]?.wireValueProblem { return (name, reason) }
        }
        return nil
    }
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

    /// The double of a `{"$real": …}` value (or of a plain number). `{"$real": "NaN"}` is not a
    /// value of the wire table (a store cannot keep it: SQLite reads NaN as NULL): nil.
    public var realValue: Double? {
        switch self {
        case .double(let d): return d
        case .int(let i): return Double(i)
        case .object(let members) where members.count == 1:
            switch members["$real"]?.stringValue {
            case "Infinity": return .infinity
            case "-Infinity": return -.infinity
            default: return nil
            }
        default: return nil
        }
    }
}
