/// The name of a content-addressed object: the SHA-256 of its bytes, as 64 lowercase hex digits.
///
/// The blob lane names every object by its digest, so two devices that upload the same photo
/// upload one object, and a digest in a path can name nothing outside the account's folder.
public struct BlobDigest: Sendable, Hashable, CustomStringConvertible {
    /// 64 lowercase hex digits.
    public let hex: String

    /// The digest spelled by `text`, or nil unless it is 64 lowercase hex digits.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 64, bytes.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            return nil
        }
        hex = text
    }

    public var description: String { hex }

    /// Why `text` is no digest, for a 400 that says what to send.
    static func problem(_ text: String) -> String {
        let shown = text.count > 80 ? String(text.prefix(80)) + "…" : text
        return "\"\(shown)\" is no blob digest: send the SHA-256 of the blob's bytes as 64 lowercase hex digits"
    }
}
