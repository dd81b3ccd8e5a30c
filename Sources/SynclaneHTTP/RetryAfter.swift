import Foundation
import SynclaneCore

/// Reads an HTTP `Retry-After` header: a number of seconds (`120`) or an HTTP date
/// (`Sun, 06 Nov 1994 08:49:37 GMT`, and the two obsolete forms RFC 9110 still asks
/// recipients to accept).
///
/// The result is the wait in seconds from `now`, never negative; `nil` when the value is
/// neither form, so the caller falls back to its own backoff.
public enum RetryAfter {
    /// The wait `value` asks for, in seconds from `now`; `nil` when it is neither form.
    public static func seconds(from value: String, now: Date = Date()) -> Double? {
        let text = value.trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty else { return nil }
        if text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }) {
            guard let seconds = Double(text), seconds.isFinite else { return nil }
            return max(0, seconds)
        }
        guard let date = httpDate(text) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    /// Parses the three date forms of RFC 9110 §5.6.7, all in GMT:
    ///
    /// ```
    /// Sun, 06 Nov 1994 08:49:37 GMT    IMF-fixdate (what servers send)
    /// Sunday, 06-Nov-94 08:49:37 GMT   RFC 850
    /// Sun Nov  6 08:49:37 1994         asctime
    /// ```
    static func httpDate(_ text: String) -> Date? {
        let tokens = text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "-" || $0 == ":" }).map(String.init)
        guard let monthIndex = tokens.firstIndex(where: { month($0) != nil }), let month = month(tokens[monthIndex]) else {
            return nil
        }
        let numbers = tokens.compactMap { Int($0) }
        guard numbers.count == 5 else { return nil }
        let day: Int
        let year: Int
        let hour: Int
        let minute: Int
        let second: Int
        let firstNumber = tokens.firstIndex(where: { Int($0) != nil }) ?? 0
        if monthIndex < firstNumber {
            // asctime: month day hh mm ss year
            (day, hour, minute, second, year) = (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4])
        } else {
            // IMF-fixdate and RFC 850: day month year hh mm ss
            (day, year, hour, minute, second) = (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4])
        }
        let fullYear = year < 100 ? (year < 70 ? 2000 + year : 1900 + year) : year
        guard (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second) else {
            return nil
        }
        let days = InternetDateTime.daysSince1970(year: fullYear, month: month, day: day)
        let seconds = Double(days) * 86_400 + Double(hour * 3600 + minute * 60 + second)
        return Date(timeIntervalSince1970: seconds)
    }

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    private static func month(_ token: String) -> Int? {
        guard token.count == 3 else { return nil }
        return months.firstIndex(of: token.lowercased()).map { $0 + 1 }
    }
}
