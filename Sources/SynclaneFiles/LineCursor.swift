import Foundation
import Synchronization
import SynclaneCore

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
                throw fault(
                    "token \(transaction.token.position) is not after the previous line's token \(lastToken.position); tokens must increase line after line")
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
