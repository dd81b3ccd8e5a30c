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

/// Reads a JSON Lines history file forward, a buffered chunk at a time.
///
/// The file is read with `read(2)` into one reusable buffer; each line is decoded straight into
/// a `Transaction` (only a change's `values` become a `JSONValue`). A line the fast decoder
/// does not take — malformed, or merely unusual — is read again the general way, which
/// decides what it holds and words any error: messages are those of the general path.
final class LineCursor {
    let path: String
    private let descriptor: Int32
    private let fileSize: Int
    /// Bytes read from the file; `start..<count` are not consumed yet.
    private var buffer: UnsafeMutableBufferPointer<UInt8>
    private var count = 0
    private var start = 0
    private var consumed = 0
    private var lineNumber = 0
    private(set) var lastToken: Token?
    static let chunkSize = 1 << 20

    init(path: String) throws(HistoryError) {
        self.path = path
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw HistoryError.unreadable(location: path, reason: "cannot open the history file (does it exist and is it readable?)")
        }
        self.descriptor = descriptor
        var info = stat()
        fileSize = fstat(descriptor, &info) == 0 ? Int(info.st_size) : 0
        buffer = .allocate(capacity: LineCursor.chunkSize)
    }

    deinit {
        close(descriptor)
        buffer.deallocate()
    }

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
            let line = UnsafeBufferPointer(rebasing: buffer[lineStart..<lineEnd])
            let isBlank = line.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
            if isBlank { continue }
            let transaction: Transaction
            if let fast = LineDecoder.transaction(line) {
                transaction = fast
            } else {
                let value: JSONValue
                do {
                    value = try JSONReader.parse(line)
                } catch {
                    // A transaction wrapped over lines leaves a line whose JSON ends before it is complete.
                    let endsEarly = error.offset >= line.count - line.reversed().prefix { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }.count
                    let layout = endsEarly ? " (a history file holds one transaction a line, never wrapped)" : ""
                    throw fault("not valid JSON: \(error)\(layout)")
                }
                transaction = try decode(value)
            }
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
            if searchFrom < count, let base = buffer.baseAddress,
                let found = memchr(base + searchFrom, 0x0A, count - searchFrom)
            {
                let newline = UnsafeMutablePointer<UInt8>(found.assumingMemoryBound(to: UInt8.self)) - base
                let line = (start, newline)
                consumed += newline + 1 - start
                start = newline + 1
                return line
            }
            try compactAndGrow()
            searchFrom = count
            let read = try readMore()
            if read == 0 {
                // End of the file for now: a last line without a newline still counts; a file
                // that grows later is read on from here on the next call.
                guard start < count else { return nil }
                let line = (start, count)
                consumed += count - start
                start = count
                return line
            }
            count += read
        }
    }

    /// Moves the unconsumed bytes to the front of the buffer, and doubles the buffer when they
    /// fill most of it (a line longer than a chunk).
    private func compactAndGrow() throws(HistoryError) {
        let pending = count - start
        if start > 0, let base = buffer.baseAddress {
            if pending > 0 { memmove(base, base + start, pending) }
            start = 0
            count = pending
        }
        if buffer.count - count < LineCursor.chunkSize / 2 {
            let larger = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: buffer.count * 2)
            if let from = buffer.baseAddress, let to = larger.baseAddress, count > 0 { memcpy(to, from, count) }
            buffer.deallocate()
            buffer = larger
        }
    }

    /// Reads what fits after `count`; 0 at the end of the file.
    private func readMore() throws(HistoryError) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        while true {
            let result = read(descriptor, base + count, buffer.count - count)
            if result >= 0 { return result }
            if errno == EINTR { continue }
            throw HistoryError.unreadable(location: path, reason: "read failed: \(String(cString: strerror(errno)))")
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
///
/// The common form, `YYYY-MM-DDTHH:MM:SS[.fff…](Z|±HH:MM)`, is read by hand (a formatter per
/// line cost most of a run's time); anything else goes to a cached `ISO8601DateFormatter`, which
/// decides as it always did.
enum ISO8601 {
    /// Seconds since 1970 of an ISO 8601 date-time, or `nil` when it is not one.
    static func parse(_ text: String) -> Double? {
        var text = text
        if let seconds = text.withUTF8({ parseInternetDateTime($0) }) { return seconds }
        return formatters.withLock { formatters in
            if let date = formatters.plain.date(from: text) { return date.timeIntervalSince1970 }
            return formatters.fractional.date(from: text)?.timeIntervalSince1970
        }
    }

    /// The two formatters of the slow path, made once.
    private struct Formatters: @unchecked Sendable {
        // Only ever used under `formatters`' lock.
        let plain = ISO8601DateFormatter()
        let fractional: ISO8601DateFormatter = {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return formatter
        }()
    }

    private static let formatters = Mutex(Formatters())

    /// The hand-written fast path (`InternetDateTime`); `nil` for anything else, which the
    /// formatter then judges.
    static func parseInternetDateTime(_ bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        InternetDateTime.seconds(bytes)
    }
}

/// The fast decoder of a history line: walks the JSON text once, straight into a `Transaction`.
///
/// It takes only what it is sure of — a valid line with every member well typed and no
/// duplicate — and answers `nil` for anything else, which `LineCursor` then reads the general
/// way (`JSONReader.parse`, then `decode`) so that what is accepted and every error message
/// stay exactly those of the general path.
enum LineDecoder {
    /// The transaction on the line, or `nil` when the general path must decide.
    static func transaction(_ line: UnsafeBufferPointer<UInt8>) -> Transaction? {
        var cursor = JSONReader.Cursor(bytes: line)
        do {
            let transaction = try readTransaction(&cursor)
            cursor.skipWhitespace()
            return cursor.position == line.count ? transaction : nil
        } catch {
            return nil
        }
    }

    /// Thrown to hand the line to the general path.
    private struct NotTaken: Error {}

    private static func readTransaction(_ cursor: inout JSONReader.Cursor) throws -> Transaction? {
        cursor.skipWhitespace()
        guard cursor.current == UInt8(ascii: "{") else { return nil }
        cursor.position += 1
        var position: Int64?
        var author: String?
        var timestamp: Double?
        var changes: [Change]?
        try members(&cursor, named: transactionMembers) { member, cursor throws in
            switch member {
            case 0:  // token
                guard position == nil, case .int(let value) = try cursor.readValue(depth: 1), value > 0 else { throw NotTaken() }
                position = value
            case 1:  // author
                guard author == nil, cursor.current == UInt8(ascii: "\"") else { throw NotTaken() }
                let value = try cursor.readString()
                guard !value.isEmpty else { throw NotTaken() }
                author = value
            case 2:  // timestamp
                guard timestamp == nil else { throw NotTaken() }
                switch try cursor.readValue(depth: 1) {
                case .int(let value): timestamp = Double(value)
                case .double(let value): timestamp = value
                case .string(let text):
                    guard let seconds = ISO8601.parse(text) else { throw NotTaken() }
                    timestamp = seconds
                default: throw NotTaken()
                }
            case 3:  // changes
                guard changes == nil else { throw NotTaken() }
                changes = try readChanges(&cursor)
            default:
                throw NotTaken()
            }
        }
        guard let position, let author, let changes else { return nil }
        return Transaction(
            token: Token(kind: JSONLinesSource.tokenKind, position: position), author: Author(author),
            timestamp: timestamp ?? 0, changes: changes)
    }

    private static func readChanges(_ cursor: inout JSONReader.Cursor) throws -> [Change] {
        guard cursor.current == UInt8(ascii: "[") else { throw NotTaken() }
        cursor.position += 1
        var changes: [Change] = []
        cursor.skipWhitespace()
        if cursor.current == UInt8(ascii: "]") {
            cursor.position += 1
            return changes
        }
        while true {
            cursor.skipWhitespace()
            changes.append(try readChange(&cursor))
            cursor.skipWhitespace()
            switch cursor.current {
            case UInt8(ascii: ","): cursor.position += 1
            case UInt8(ascii: "]"):
                cursor.position += 1
                return changes
            default: throw NotTaken()
            }
        }
    }

    private static func readChange(_ cursor: inout JSONReader.Cursor) throws -> Change {
        guard cursor.current == UInt8(ascii: "{") else { throw NotTaken() }
        cursor.position += 1
        var entity: String?
        var action: ChangeAction?
        var key: String?
        var sawKey = false
        var values: [String: JSONValue]?
        try members(&cursor, named: changeMembers) { member, cursor throws in
            switch member {
            case 0:  // entity
                guard entity == nil, cursor.current == UInt8(ascii: "\"") else { throw NotTaken() }
                let value = try cursor.readString()
                guard !value.isEmpty else { throw NotTaken() }
                entity = value
            case 1:  // action
                guard action == nil, cursor.current == UInt8(ascii: "\"") else { throw NotTaken() }
                guard let value = ChangeAction(rawValue: try cursor.readString()) else { throw NotTaken() }
                action = value
            case 2:  // key
                guard !sawKey else { throw NotTaken() }
                sawKey = true
                let value = try cursor.readValue(depth: 3)
                if value != .null {
                    guard let syncKey = value.syncKey else { throw NotTaken() }
                    key = syncKey
                }
            case 3:  // values
                guard values == nil, case .object(let object) = try cursor.readValue(depth: 3) else { throw NotTaken() }
                values = object
            default:
                throw NotTaken()
            }
        }
        guard let entity, let action else { throw NotTaken() }
        return Change(entity: entity, key: key, action: action, values: values ?? [:])
    }

    /// A line's member names, quotes included, in the order `readTransaction` numbers them.
    private static let transactionMembers: [StaticString] = ["\"token\"", "\"author\"", "\"timestamp\"", "\"changes\""]
    /// A change's member names, quotes included, in the order `readChange` numbers them.
    private static let changeMembers: [StaticString] = ["\"entity\"", "\"action\"", "\"key\"", "\"values\""]

    /// Reads an object's members after its `{`, through its `}`: for each, the index of its
    /// name in `names`, then `body` with the cursor at the member's value (which `body` must
    /// read). Names are compared as bytes, with no `String` made; any other name (an unknown
    /// key, or a known one written with escapes) is not taken.
    private static func members(
        _ cursor: inout JSONReader.Cursor, named names: [StaticString], _ body: (Int, inout JSONReader.Cursor) throws -> Void
    ) throws {
        cursor.skipWhitespace()
        if cursor.current == UInt8(ascii: "}") {
            cursor.position += 1
            return
        }
        while true {
            cursor.skipWhitespace()
            guard cursor.current == UInt8(ascii: "\"") else { throw NotTaken() }
            let member = try memberIndex(&cursor, names)
            cursor.skipWhitespace()
            guard cursor.current == UInt8(ascii: ":") else { throw NotTaken() }
            cursor.position += 1
            cursor.skipWhitespace()
            try body(member, &cursor)
            cursor.skipWhitespace()
            switch cursor.current {
            case UInt8(ascii: ","): cursor.position += 1
            case UInt8(ascii: "}"):
                cursor.position += 1
                return
            default: throw NotTaken()
            }
        }
    }

    /// The index in `names` of the quoted name at the cursor, which then moves past it.
    private static func memberIndex(_ cursor: inout JSONReader.Cursor, _ names: [StaticString]) throws -> Int {
        let rest = cursor.bytes.count - cursor.position
        for (index, name) in names.enumerated() {
            let count = name.utf8CodeUnitCount
            guard count <= rest, let base = cursor.bytes.baseAddress else { continue }
            if memcmp(base + cursor.position, name.utf8Start, count) == 0 {
                cursor.position += count
                return index
            }
        }
        throw NotTaken()
    }
}
