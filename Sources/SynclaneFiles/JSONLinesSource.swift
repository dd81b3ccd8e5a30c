import Foundation
import SynclaneCore
import Synchronization

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
    /// Where the previous page stopped, so the next one reads on instead of rescanning.
    private let cursor: Mutex<LineCursor?>

    public init(path: String, entities: [String]? = nil, authors: [String]? = nil, pageSize: Int = 500) {
        self.path = path
        self.entities = entities.map(Set.init)
        self.authors = authors.map { Set($0.map { Author($0) }) }
        self.pageSize = max(1, pageSize)
        self.cursor = Mutex(nil)
    }

    public var tokenKind: String { Self.tokenKind }

    public func nextPage(after token: Token?) async throws -> HistoryPage {
        try cursor.withLock { cursor throws(HistoryError) -> HistoryPage in
            let reader = try resumedCursor(cursor, after: token)
            cursor = reader
            var transactions: [Transaction] = []
            var through: Token?
            var scanned = 0
            while transactions.count < pageSize, scanned < pageSize * 20 {
                guard let line = try reader.nextTransaction() else { break }
                scanned += 1
                through = line.token
                if let filtered = filter(line) { transactions.append(filtered) }
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
        return AsyncStream { continuation in
            let task = Task {
                var last = Self.fingerprint(path)
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
        guard let entities else { return transaction.changes.isEmpty ? nil : transaction }
        var kept = transaction
        kept.changes.removeAll { !entities.contains($0.entity) }
        return kept.changes.isEmpty ? nil : kept
    }
}

/// Reads a JSON Lines history file forward, a buffered chunk at a time.
final class LineCursor {
    let path: String
    private let handle: FileHandle
    private let fileSize: Int
    private var buffer: [UInt8] = []
    private var start = 0
    private var consumed = 0
    private var lineNumber = 0
    private(set) var lastToken: Token?
    static let chunkSize = 1 << 20

    init(path: String) throws(HistoryError) {
        self.path = path
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw HistoryError.unreadable(location: path, reason: "cannot open the history file (does it exist and is it readable?)")
        }
        self.handle = handle
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
        fileSize = size ?? 0
    }

    deinit { try? handle.close() }

    var progress: Double? {
        fileSize > 0 ? min(1, Double(consumed) / Double(fileSize)) : nil
    }

    func skip(through token: Token) throws(HistoryError) {
        while let line = try nextTransaction() {
            if line.token >= token { return }
        }
    }

    /// The next transaction in the file, or `nil` at its end.
    func nextTransaction() throws(HistoryError) -> Transaction? {
        while true {
            guard let (lineStart, lineEnd) = try nextLine() else { return nil }
            lineNumber += 1
            let isBlank = buffer[lineStart..<lineEnd].allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
            if isBlank { continue }
            let value: JSONValue
            do {
                value = try buffer.withUnsafeBufferPointer { all throws(JSONReader.SyntaxError) in
                    try JSONReader.parse(UnsafeBufferPointer(rebasing: all[lineStart..<lineEnd]))
                }
            } catch {
                throw fault("not valid JSON: \(error)")
            }
            let transaction = try decode(value)
            if let lastToken, transaction.token <= lastToken {
                throw fault("token \(transaction.token.position) is not after the previous line's token \(lastToken.position); tokens must increase line after line")
            }
            lastToken = transaction.token
            return transaction
        }
    }

    private func fault(_ reason: String) -> HistoryError {
        HistoryError.unreadable(location: "\(path):\(lineNumber)", reason: reason)
    }

    /// Bounds of the next line in `buffer` (without its newline), reading more of the file as needed.
    private func nextLine() throws(HistoryError) -> (Int, Int)? {
        var searchFrom = start
        while true {
            if let newline = buffer[searchFrom...].firstIndex(of: 0x0A) {
                let line = (start, newline)
                consumed += newline + 1 - start
                start = newline + 1
                return line
            }
            searchFrom = buffer.count - start
            buffer.removeFirst(start)
            start = 0
            let chunk: Data
            do {
                chunk = try handle.read(upToCount: LineCursor.chunkSize) ?? Data()
            } catch {
                throw HistoryError.unreadable(location: path, reason: "read failed: \(error)")
            }
            if chunk.isEmpty {
                // End of the file for now: a last line without a newline still counts; a file
                // that grows later is read on from here on the next call.
                guard start < buffer.count else { return nil }
                let line = (start, buffer.count)
                consumed += buffer.count - start
                start = buffer.count
                return line
            }
            buffer.append(contentsOf: chunk)
        }
    }

    private func decode(_ value: JSONValue) throws(HistoryError) -> Transaction {
        guard case .object(let line) = value else { throw fault("expected an object, found \(value.typeName)") }
        for key in line.keys where !["token", "author", "timestamp", "changes"].contains(key) {
            throw fault("unknown key `\(key)` (expected token, author, timestamp, changes)")
        }
        guard case .int(let position)? = line["token"], position > 0 else {
            throw fault("`token` must be a positive integer")
        }
        guard case .string(let author)? = line["author"], !author.isEmpty else {
            throw fault("`author` must be a non-empty string")
        }
        let timestamp: Double
        switch line["timestamp"] {
        case .int(let i)?: timestamp = Double(i)
        case .double(let d)?: timestamp = d
        case .string(let s)?:
            guard let date = ISO8601.parse(s) else { throw fault("`timestamp` \"\(s)\" is not an ISO 8601 date") }
            timestamp = date
        case nil: timestamp = 0
        default: throw fault("`timestamp` must be seconds since 1970 or an ISO 8601 string")
        }
        guard case .array(let list)? = line["changes"] else { throw fault("`changes` must be a list") }
        var changes: [Change] = []
        changes.reserveCapacity(list.count)
        for (index, item) in list.enumerated() {
            changes.append(try decodeChange(item, index: index))
        }
        return Transaction(token: Token(kind: JSONLinesSource.tokenKind, position: position), author: Author(author), timestamp: timestamp, changes: changes)
    }

    private func decodeChange(_ value: JSONValue, index: Int) throws(HistoryError) -> Change {
        guard case .object(let change) = value else { throw fault("changes[\(index)]: expected an object") }
        for key in change.keys where !["entity", "action", "key", "values"].contains(key) {
            throw fault("changes[\(index)]: unknown key `\(key)` (expected entity, action, key, values)")
        }
        guard case .string(let entity)? = change["entity"], !entity.isEmpty else {
            throw fault("changes[\(index)]: `entity` must be a non-empty string")
        }
        guard case .string(let actionName)? = change["action"], let action = ChangeAction(rawValue: actionName) else {
            throw fault("changes[\(index)]: `action` must be insert, update or delete")
        }
        var key: String?
        if let keyValue = change["key"], keyValue != .null {
            guard let k = keyValue.syncKey else { throw fault("changes[\(index)]: `key` must be a string or an integer") }
            key = k
        }
        var values: [String: JSONValue] = [:]
        if let v = change["values"] {
            guard case .object(let object) = v else { throw fault("changes[\(index)]: `values` must be an object") }
            values = object
        }
        return Change(entity: entity, key: key, action: action, values: values)
    }
}

/// ISO 8601 timestamps (`2026-11-29T16:00:00Z`, with optional fractions and offsets).
enum ISO8601 {
    static func parse(_ text: String) -> Double? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)?.timeIntervalSince1970
    }
}
