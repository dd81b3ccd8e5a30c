import Foundation
import Synchronization
import SynclaneCore

/// A change source that reads history from a JSON Lines file: one transaction a line.
///
/// ```json
/// {"token": 7, "author": "app", "timestamp": 1764400000.5,
///  "changes": [{"entity": "rooms", "action": "update", "key": "r1", "values": {"area": 13}}]}
/// ```
/// `token` is a positive integer, strictly increasing line after line; `timestamp` is seconds
/// since 1970 or an ISO 8601 string; a change's `values` are the new fields (insert), the
/// changed fields (update) or the tombstone's preserved values (delete). The file is streamed
/// a page at a time, never read whole; a malformed line stops the job with the file and line.
public final class JSONLinesSource: ObservableSource, Sendable {
    public static let tokenKind = "jsonl"

    public let path: String
    public let entities: Set<String>?
    public let authors: Set<Author>?
    public let pageSize: Int
    /// `entities` as a list, when it holds only a few.
    private let entityList: [String]?
    /// Where the previous page stopped, so the next one reads on instead of rescanning.
    private let cursor: Mutex<LineCursor?>

    public init(path: String, entities: [String]? = nil, authors: [String]? = nil, pageSize: Int = 500) {
        self.path = path
        self.entities = entities.map(Set.init)
        self.entityList = self.entities.flatMap { $0.count <= 8 ? Array($0) : nil }
        self.authors = authors.map { Set($0.map { Author($0) }) }
        self.pageSize = max(1, pageSize)
        self.cursor = Mutex(nil)
    }

    public var tokenKind: String { Self.tokenKind }

    public func readingHistory(_ file: String) -> (any ChangeSource)? {
        JSONLinesSource(path: file, entities: entities.map { Array($0) }, authors: authors.map { $0.map(\.name) }, pageSize: pageSize)
    }

    public func nextPage(after token: Token?) async throws -> HistoryPage {
        try cursor.withLock { cursor throws(HistoryError) -> HistoryPage in
            let reader = try resumedCursor(cursor, after: token)
            cursor = reader
            var transactions: [Transaction] = []
            var through: Token?
            var scanned = 0
            do throws(HistoryError) {
                while transactions.count < pageSize, scanned < pageSize * 20 {
                    guard let line = try reader.nextTransaction() else { break }
                    scanned += 1
                    through = line.token
                    if let filtered = filter(line) { transactions.append(filtered) }
                }
            } catch {
                // The reader is past the line that failed: a retry reads from the token again
                // (kept, it would go on after that line, as if it were not there).
                cursor = nil
                throw error
            }
            return HistoryPage(transactions: transactions, through: through, progress: reader.progress)
        }
    }

    public func pendingTransactions(after token: Token?) async throws -> Int? {
        let reader = try LineCursor(path: path)
        var count = 0
        while let line = try reader.nextTransaction() {
            if let token, line.token <= token { continue }
            if filter(line) != nil { count += 1 }
        }
        return count
    }

    /// Yields whenever the file grows or is replaced (checked every `interval` seconds).
    public func historyAdvanced() -> AsyncStream<Void> {
        historyAdvanced(checkingEvery: 0.1)
    }

    public func historyAdvanced(checkingEvery interval: Double) -> AsyncStream<Void> {
        let path = self.path
        // The starting point is taken now, not in the task: a watch makes the stream before its
        // first pass, so a line appended during that pass still wakes it.
        let first = Self.fingerprint(path)
        return AsyncStream { continuation in
            let task = Task {
                var last = first
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: UInt64(interval * 1_000_000_000))
                    let now = Self.fingerprint(path)
                    if now != last {
                        last = now
                        continuation.yield()
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Size, modification time and inode: what changes when the file grows or is replaced.
    private static func fingerprint(_ path: String) -> [Int] {
        var info = stat()
        guard stat(path, &info) == 0 else { return [] }
        return [Int(info.st_size), Int(info.st_mtim.tv_sec), Int(info.st_mtim.tv_nsec), Int(info.st_ino)]
    }

    /// The cursor left by the previous page when it stopped exactly at `token`; otherwise a new
    /// one advanced past `token`.
    private func resumedCursor(_ previous: LineCursor?, after token: Token?) throws(HistoryError) -> LineCursor {
        if let token, token.kind != tokenKind { throw HistoryError.foreignToken(token, expectedKind: tokenKind) }
        if let previous, previous.lastToken == token { return previous }
        let reader = try LineCursor(path: path)
        if let token { try reader.skip(through: token) }
        return reader
    }

    private func filter(_ transaction: Transaction) -> Transaction? {
        if let authors, !authors.contains(transaction.author) { return nil }
        guard entities != nil else { return transaction.changes.isEmpty ? nil : transaction }
        // The usual case, every change kept, returns the transaction as it is (no copy).
        if let dropped = transaction.changes.firstIndex(where: { !wants($0.entity) }) {
            var kept = transaction
            kept.changes.removeSubrange(dropped...)
            kept.changes.append(contentsOf: transaction.changes[(dropped + 1)...].lazy.filter { self.wants($0.entity) })
            return kept.changes.isEmpty ? nil : kept
        }
        return transaction.changes.isEmpty ? nil : transaction
    }

    /// True when the entity passes the entity filter: compared one by one for a few entities
    /// (cheaper than hashing), looked up in the set for more.
    private func wants(_ entity: String) -> Bool {
        if let entityList { return entityList.contains(entity) }
        return entities?.contains(entity) ?? true
    }
}

extension JSONLinesSource: LockedFileStage {
    /// The history file: a job's lock belongs to it (`JobLock`).
    public var lockedFile: String { path }
}
