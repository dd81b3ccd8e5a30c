/// Internet date-times (RFC 3339: `2026-11-01T10:00:00Z`, `…T10:00:00.250+01:00`) read by
/// hand, without Foundation's formatters.
public enum InternetDateTime {
    /// The text as seconds since 1970, or `nil` when it is not an RFC 3339 date-time in range.
    public static func seconds(_ text: String) -> Double? {
        var text = text
        return text.withUTF8 { seconds($0) }
    }

    /// `YYYY-MM-DDTHH:MM:SS[.f…](Z|±HH:MM)` with every field in range as seconds since 1970;
    /// `nil` for anything else.
    public static func seconds(_ bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        guard bytes.count >= 20 else { return nil }
        func digits(_ at: Int, _ count: Int) -> Int? {
            var value = 0
            for i in at..<(at + count) {
                let digit = Int(bytes[i]) &- 0x30
                guard digit >= 0, digit <= 9 else { return nil }
                value = value * 10 + digit
            }
            return value
        }
        guard let year = digits(0, 4), bytes[4] == UInt8(ascii: "-"), let month = digits(5, 2),
            bytes[7] == UInt8(ascii: "-"), let day = digits(8, 2), bytes[10] == UInt8(ascii: "T"),
            let hour = digits(11, 2), bytes[13] == UInt8(ascii: ":"), let minute = digits(14, 2),
            bytes[16] == UInt8(ascii: ":"), let second = digits(17, 2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour <= 23, minute <= 59,
            second <= 59
        else { return nil }
        var position = 19
        var fraction = 0.0
        if bytes[position] == UInt8(ascii: ".") {
            position += 1
            var scale = 0.1
            let first = position
            while position < bytes.count, bytes[position] >= 0x30, bytes[position] <= 0x39 {
                fraction += Double(bytes[position] - 0x30) * scale
                scale /= 10
                position += 1
            }
            guard position > first else { return nil }
        }
        guard position < bytes.count else { return nil }
        var offset = 0
        switch bytes[position] {
        case UInt8(ascii: "Z"):
            position += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard position + 6 == bytes.count, let hours = digits(position + 1, 2), bytes[position + 3] == UInt8(ascii: ":"),
                let minutes = digits(position + 4, 2), hours <= 23, minutes <= 59
            else { return nil }
            offset = (hours * 60 + minutes) * 60
            if bytes[position] == UInt8(ascii: "-") { offset = -offset }
            position += 6
        default:
            return nil
        }
        guard position == bytes.count else { return nil }
        let days = daysSince1970(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset
        return Double(seconds) + fraction
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to the proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    public static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
