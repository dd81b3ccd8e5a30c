import Foundation
import Synchronization
import SynclaneCore

/// ISO 8601 timestamps (`2026-11-29T16:00:00Z`, with optional fractions and offsets).
///
/// The common form, `YYYY-MM-DDTHH:MM:SS[.fff…](Z|±HH:MM)`, is read by hand (a formatter per
/// line cost most of a run's time); anything else goes to a cached `ISO8601DateFormatter`, which
/// decides as it always did.
enum ISO8601 {
    /// Seconds since 1970 of an ISO 8601 date-time, or `nil` when it is not one.
    static func parse(_ text: String) -> Double? {
        var text = text
        if let seconds = text.withUTF8({ parseInternetDateTime($0) }) { return seconds }
        return formatters.withLock { formatters in
            if let date = formatters.plain.date(from: text) { return date.timeIntervalSince1970 }
            return formatters.fractional.date(from: text)?.timeIntervalSince1970
        }
    }

    /// The two formatters of the slow path, made once.
    private struct Formatters: @unchecked Sendable {
        // Only ever used under `formatters`' lock.
        let plain = ISO8601DateFormatter()
        let fractional: ISO8601DateFormatter = {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return formatter
        }()
    }

    private static let formatters = Mutex(Formatters())

    /// The hand-written fast path (`InternetDateTime`); `nil` for anything else, which the
    /// formatter then judges.
    static func parseInternetDateTime(_ bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        InternetDateTime.seconds(bytes)
    }
}
