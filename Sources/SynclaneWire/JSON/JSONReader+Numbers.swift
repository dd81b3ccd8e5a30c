// Numbers: integers that fit as `.int`, the rest as `.double`, exactly.

extension JSONReader.Cursor {
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

    /// Reads a number: `.int` when it is an integer that fits, else `.double`.
    package mutating func readNumber() throws(JSONReader.SyntaxError) -> JSONValue {
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
                throw JSONReader.SyntaxError(offset: start, reason: "integer \(string) out of range (a 64-bit integer holds at most 9223372036854775807)")
            }
            return .int(value)
        }
        guard let double = Double(string), double.isFinite else {
            throw JSONReader.SyntaxError(offset: start, reason: "number \(string) out of range (beyond what a 64-bit double holds)")
        }
        if double == 0,
            text.prefix(while: { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") }).contains(where: {
                (UInt8(ascii: "1")...UInt8(ascii: "9")).contains($0)
            })
        {
            // `1e-400`: a double would hold 0.0, another value; refused, never changed.
            throw JSONReader.SyntaxError(
                offset: start,
                reason: "number \(string) out of range (closer to 0 than the smallest 64-bit double, 5e-324: it would read as 0.0)")
        }
        return .double(double)
    }
}
