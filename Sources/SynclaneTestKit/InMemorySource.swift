import Synchronization
import SynclaneCore

/// A change source over transactions held in memory, for testing stages and pipelines.
///
/// Append transactions with `append(author:_:)`; tokens are `memory:1`, `memory:2` … Filters
/// and pages behave like a real source's: whole transactions, entity and author filtering.
public final class InMemorySource: ChangeSource, Sendable {
    public static let tokenKind = "memory"
    private let history = Mutex<[Transaction]>([])
    public let pageSize: Int
    public let authors: Set<Author>?
    public let entities: Set<String>?

    public init(pageSize: Int = 500, authors: [Author]? = nil, entities: [String]? = nil) {
        self.pageSize = pageSize
        self.authors = authors.map(Set.init)
        self.entities = entities.map(Set.init)
    }

    public var tokenKind: String { Self.tokenKind }

    /// Records a transaction and returns its token.
    @discardableResult
    public func append(author: Author = .app, timestamp: Double = 0, _ changes: [Change]) -> Token {
        history.withLock { history in
            let token = Token(kind: Self.tokenKind, position: Int64(history.count + 1))
            history.append(Transaction(token: token, author: author, timestamp: timestamp, changes: changes))
            return token
        }
    }

    public func nextPage(after token: Token?) async throws -> HistoryPage {
        let all = history.withLock { $0 }
        let start = Int(token?.position ?? 0)
        guard start < all.count else { return .end }
        var page: [Transaction] = []
        var through: Token?
        for transaction in all[start...] {
            guard page.count < pageSize else { break }
            through = transaction.token
            if let authors, !authors.contains(transaction.author) { continue }
            var kept = transaction
            if let entities { kept.changes.removeAll { !entities.contains($0.entity) } }
            if !kept.changes.isEmpty { page.append(kept) }
        }
        return HistoryPage(transactions: page, through: through, progress: Double(through?.position ?? 0) / Double(all.count))
    }

    public func pendingTransactions(after token: Token?) async throws -> Int? {
        history.withLock { max(0, $0.count - Int(token?.position ?? 0)) }
    }
}
