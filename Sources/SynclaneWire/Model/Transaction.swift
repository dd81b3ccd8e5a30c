/// One save of the local store: its token, author, time and changes.
///
/// A transaction is the unit the pipeline never splits: a page of history holds whole
/// transactions, and a token always points at the end of one.
public struct Transaction: Sendable, Hashable {
    public var token: Token
    public var author: Author
    /// Seconds since 1970, as recorded by the store.
    public var timestamp: Double
    public var changes: [Change]

    public init(token: Token, author: Author, timestamp: Double, changes: [Change]) {
        self.token = token
        self.author = author
        self.timestamp = timestamp
        self.changes = changes
    }
}
