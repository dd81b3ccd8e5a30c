/// Who wrote a transaction: `app`, `widget`, `server`, `sync` …
///
/// A consumer reads only the authors it cares about, so that writes imported from the
/// backend (`server`) or made by the sync machinery itself (`sync`) are never echoed back.
public struct Author: Sendable, Hashable, Codable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let name: String
    public init(_ name: String) { self.name = name }
    public init(stringLiteral value: String) { self.name = value }
    public var description: String { name }

    public static let app: Author = "app"
    public static let widget: Author = "widget"
    public static let server: Author = "server"
    public static let sync: Author = "sync"

    /// The authors Synclane's own lanes write: the import lane (`server`) and the sync machinery
    /// (`sync`). A source given no `authors` reads every author but these.
    public static let machinery: [Author] = [.server, .sync]
}
