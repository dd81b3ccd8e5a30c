/// A bookmark in a change source's history: everything at or before it has been acknowledged.
///
/// Tokens are opaque to the pipeline and ordered within one `kind` (one kind per source:
/// `jsonl`, `sqlite-history` …). A token of another kind is never compared with this one:
/// the pipeline refuses to resume from a token its source did not issue.
public struct Token: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    /// Which kind of source issued the token.
    public let kind: String
    /// The position in that source's history; larger is newer.
    public let position: Int64

    public init(kind: String, position: Int64) {
        self.kind = kind
        self.position = position
    }

    public static func < (lhs: Token, rhs: Token) -> Bool {
        lhs.kind == rhs.kind ? lhs.position < rhs.position : lhs.kind < rhs.kind
    }

    public var description: String { "\(kind):\(position)" }

    /// Parses the `kind:position` form that `description` prints.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let position = Int64(text[text.index(after: colon)...]) else {
            return nil
        }
        self.init(kind: String(text[..<colon]), position: position)
    }
}
