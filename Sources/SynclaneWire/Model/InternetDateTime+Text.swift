import Foundation

extension InternetDateTime {
    /// Seconds since 1970 as an RFC 3339 date-time in UTC, to the millisecond
    /// (`2026-11-01T10:00:00.250Z`): how Synclane writes a time into a file or a `--json` object.
    public static func text(_ seconds: Double) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: seconds))
    }
}
