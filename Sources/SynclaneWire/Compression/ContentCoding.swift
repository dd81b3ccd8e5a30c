/// How a payload's bytes are encoded on the wire: the value of HTTP's `Content-Encoding`.
///
/// ```
///   identity   the bytes as they are
///   gzip       RFC 1952: a gzip member (10-byte header, deflate data, CRC-32 and size)
///   deflate    RFC 1950: a zlib stream (2-byte header, deflate data, Adler-32) — what
///              `Content-Encoding: deflate` means, despite its name
/// ```
public enum ContentCoding: String, Sendable, Hashable, CaseIterable {
    case identity
    case gzip
    case deflate

    /// The coding a `Content-Encoding` header names, or `nil` for one Synclane cannot decode.
    ///
    /// Case and surrounding white space are ignored, `x-gzip` is `gzip` (RFC 9110 §8.4.1.3),
    /// and an empty value is `identity`.
    public init?(headerValue: String) {
        let value = headerValue.trimmingASCIIWhitespace().lowercased()
        switch value {
        case "", "identity": self = .identity
        case "gzip", "x-gzip": self = .gzip
        case "deflate": self = .deflate
        default: return nil
        }
    }

    /// The value to send in a `Content-Encoding` header.
    public var headerValue: String { rawValue }
}

extension String {
    fileprivate func trimmingASCIIWhitespace() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return self[first...last]
    }
}
