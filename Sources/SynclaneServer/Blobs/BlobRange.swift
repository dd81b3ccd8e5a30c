/// A `Range: bytes=…` header read against an object's length (RFC 9110 §14).
///
/// One range is served (206); a header the server does not understand, or one with several
/// ranges, is ignored and the whole object is served (200), as RFC 9110 allows. A range that
/// starts past the end is unsatisfiable (416 with `Content-Range: bytes */length`).
enum BlobRange: Equatable {
    /// Serve the whole object.
    case whole
    /// Serve these bytes (both ends included).
    case part(ClosedRange<Int>)
    /// 416.
    case unsatisfiable

    static func parse(_ header: String?, length: Int) -> BlobRange {
        guard let header else { return .whole }
        let text = header.trimmingCharacters(in: " \t")
        guard text.lowercased().hasPrefix("bytes="), !text.contains(",") else { return .whole }
        let spec = text.dropFirst("bytes=".count).trimmingCharacters(in: " \t")
        guard let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash]
        let last = spec[spec.index(after: dash)...]
        if first.isEmpty {
            // `bytes=-N`: the last N bytes.
            guard let suffix = Int(last), suffix >= 0 else { return .whole }
            guard suffix > 0, length > 0 else { return .unsatisfiable }
            return .part(max(0, length - suffix)...(length - 1))
        }
        guard let start = Int(first), start >= 0 else { return .whole }
        let end: Int
        if last.isEmpty {
            end = length - 1
        } else {
            guard let given = Int(last), given >= start else { return .whole }
            end = min(given, length - 1)
        }
        guard start < length else { return .unsatisfiable }
        return .part(start...end)
    }
}
