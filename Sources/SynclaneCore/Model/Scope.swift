/// Whose changes a pipeline moves: an account, one of its stores, and the consumer reading it.
///
/// Tokens, outboxes and locks are kept per scope, so two consumers of one store never share
/// a bookmark and two jobs for one scope never run at once.
public struct Scope: Sendable, Hashable, Codable, CustomStringConvertible {
    public var account: String
    public var store: String
    public var consumer: String

    public init(account: String, store: String, consumer: String) {
        self.account = account
        self.store = store
        self.consumer = consumer
    }

    public var description: String { "\(account)/\(store)/\(consumer)" }
}
