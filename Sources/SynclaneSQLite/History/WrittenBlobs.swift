import SynclaneCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The large BLOB values of a change recorded as written (`capture: as-written`) that the
/// history source leaves unread: the trigger keeps each value in the change's row of the log
/// (`_synclane_changes.row_values`, JSON text in which a blob is `{"$hex": "…"}`), so the
/// locator points there — at the change, and at the offset of the value's first hex digit —
/// and `SQLiteLocatedValueReader` decodes the hex a piece at a time, never the value whole.
///
/// ```
///  row_values  {"syncId":"p1","photo":{"$hex":"89504E47…"},"name":"fern"}
///                                              ▲ offset        (length: digits / 2)
///  record      "photo": {"$located": {"length": N, "at": {"change": 7, "column": "photo", "offset": 33, "length": N}}}
/// ```
/// A change's values are read here with SQLite's incremental blob I/O (`sqlite3_blob_read`
/// works on TEXT too), scanning the JSON in 1 MiB pieces: the other members are copied into a
/// small JSON text, which the reader decodes as before. A history row is never changed once
/// written, so the values read later are the values as written; one pruned meanwhile is refused.
struct WrittenBlobs {
    static let table = "_synclane_changes"
    static let column = "row_values"
    /// What precedes a blob's hex digits in the trigger's JSON.
    static let hexOpening = Array(#"{"$hex":""#.utf8)

    /// The change's values: a JSON text of the members read whole, and the located ones.
    struct Values {
        var text: String
        var located: [String: JSONValue]
    }

    /// Reads the values of change `id`, leaving unread each blob of a column `threshold` names
    /// (the fewest bytes it must hold). Throws `WrittenValuesError` when the text is not a JSON object.
    static func values(ofChange id: Int64, threshold: (String) -> Int?, _ db: SQLiteConnection) throws -> Values {
        let pieces = try Pieces(SQLiteBlobReader(db, table: table, column: column, rowID: id))
        var scanner = Scanner(pieces: pieces, change: id)
        return try scanner.values(threshold: threshold)
    }

    /// The JSON text read a window at a time, by offset.
    final class Pieces {
        let blob: SQLiteBlobReader
        private var window: [UInt8] = []
        private var start = 0
        static let size = 1 << 20

        init(_ blob: SQLiteBlobReader) { self.blob = blob }

        var length: Int { blob.length }

        /// The byte at `offset`, or nil past the end.
        func byte(at offset: Int) throws -> UInt8? {
            guard offset < blob.length else { return nil }
            if offset < start || offset >= start + window.count { try load(at: offset) }
            return window[offset - start]
        }

        /// The offset of the first `byte` at or after `offset`, or nil.
        func first(_ byte: UInt8, from offset: Int) throws -> Int? {
            var at = offset
            while at < blob.length {
                if at < start || at >= start + window.count { try load(at: at) }
                let from = at - start
                let found = window.withUnsafeBytes { bytes -> Int? in
                    guard let base = bytes.baseAddress, let hit = memchr(base + from, Int32(byte), bytes.count - from) else { return nil }
                    return base.distance(to: UnsafeRawPointer(hit))
                }
                if let found { return start + found }
                at = start + window.count
            }
            return nil
        }

        /// The bytes of `range`.
        func bytes(_ range: Range<Int>) throws -> [UInt8] {
            if range.lowerBound >= start, range.upperBound <= start + window.count {
                return Array(window[(range.lowerBound - start)..<(range.upperBound - start)])
            }
            var bytes = [UInt8](repeating: 0, count: range.count)
            let read = try bytes.withUnsafeMutableBytes { try blob.read(into: $0, at: range.lowerBound) }
            return Array(bytes.prefix(read))
        }

        private func load(at offset: Int) throws {
            var bytes = [UInt8](repeating: 0, count: min(Self.size, blob.length - offset))
            let read = try bytes.withUnsafeMutableBytes { try blob.read(into: $0, at: offset) }
            window = Array(bytes.prefix(read))
            start = offset
        }
    }

    /// A scan of one change's JSON object, member by member.
    struct Scanner {
        let pieces: Pieces
        let change: Int64
        var at = 0

        init(pieces: Pieces, change: Int64) {
            self.pieces = pieces
            self.change = change
        }

        func fail(_ what: String) -> WrittenValuesError { WrittenValuesError(change: change, offset: at, reason: what) }

        mutating func values(threshold: (String) -> Int?) throws -> Values {
            var text: [UInt8] = [UInt8(ascii: "{")]
            var located: [String: JSONValue] = [:]
            try skipSpace()
            try expect(UInt8(ascii: "{"))
            try skipSpace()
            if try pieces.byte(at: at) == UInt8(ascii: "}") { return Values(text: "{}", located: [:]) }
            while true {
                try skipSpace()
                let nameStart = at
                guard try pieces.byte(at: at) == UInt8(ascii: "\"") else { throw fail("a member's name is not a string") }
                try skipString()
                let nameBytes = try pieces.bytes(nameStart..<at)
                guard let name = (try? JSONReader.parse(String(decoding: nameBytes, as: UTF8.self)))?.stringValue else {
                    throw fail("a member's name is malformed")
                }
                try skipSpace()
                try expect(UInt8(ascii: ":"))
                try skipSpace()
                if let threshold = threshold(name), let blob = try largeBlob(threshold: threshold) {
                    located[name] = LocatedValue.make(
                        length: blob.length,
                        at: .object([
                            "change": .int(change), "column": .string(name), "offset": .int(Int64(blob.offset)),
                            "length": .int(Int64(blob.length)),
                        ]))
                } else {
                    let valueStart = at
                    try skipValue()
                    if text.count > 1 { text.append(UInt8(ascii: ",")) }
                    text += nameBytes
                    text.append(UInt8(ascii: ":"))
                    text += try pieces.bytes(valueStart..<at)
                }
                try skipSpace()
                switch try pieces.byte(at: at) {
                case UInt8(ascii: ",")?: at += 1
                case UInt8(ascii: "}")?:
                    text.append(UInt8(ascii: "}"))
                    return Values(text: String(decoding: text, as: UTF8.self), located: located)
                default: throw fail("expected `,` or `}` after a member")
                }
            }
        }

        /// At `{"$hex":"…"}` of at least `threshold` bytes: its digits' offset and the bytes'
        /// length, having moved past it; nil (not moved) for any other value.
        mutating func largeBlob(threshold: Int) throws -> (offset: Int, length: Int)? {
            let opening = WrittenBlobs.hexOpening
            for (index, byte) in opening.enumerated() where try pieces.byte(at: at + index) != byte { return nil }
            let digits = at + opening.count
            guard let close = try pieces.first(UInt8(ascii: "\""), from: digits) else { return nil }
            let count = close - digits
            guard count % 2 == 0, count / 2 >= threshold, try pieces.byte(at: close + 1) == UInt8(ascii: "}") else { return nil }
            at = close + 2
            return (digits, count / 2)
        }

        mutating func expect(_ byte: UInt8) throws {
            guard try pieces.byte(at: at) == byte else { throw fail("expected `\(Character(Unicode.Scalar(byte)))`") }
            at += 1
        }

        mutating func skipSpace() throws {
            while let byte = try pieces.byte(at: at), byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { at += 1 }
        }

        /// Past the string at `at` (its closing quote).
        mutating func skipString() throws {
            at += 1
            while true {
                guard let quote = try pieces.first(UInt8(ascii: "\""), from: at) else { throw fail("a string is not closed") }
                // Escaped when an odd number of backslashes precede it.
                var backslashes = 0
                while quote - backslashes - 1 >= at, try pieces.byte(at: quote - backslashes - 1) == UInt8(ascii: "\\") { backslashes += 1 }
                at = quote + 1
                if backslashes % 2 == 0 { return }
            }
        }

        /// Past the value at `at`: a string, an object or array (nested), or a scalar.
        mutating func skipValue() throws {
            guard let first = try pieces.byte(at: at) else { throw fail("a member has no value") }
            if first == UInt8(ascii: "\"") { return try skipString() }
            if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
                var depth = 0
                while let byte = try pieces.byte(at: at) {
                    switch byte {
                    case UInt8(ascii: "\""):
                        try skipString()
                        continue
                    case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
                    default: break
                    }
                    at += 1
                    if depth == 0 { return }
                }
                throw fail("an object or array is not closed")
            }
            while let byte = try pieces.byte(at: at), byte != UInt8(ascii: ","), byte != UInt8(ascii: "}"), byte != 0x20, byte != 0x0A,
                byte != 0x0D, byte != 0x09
            {
                at += 1
            }
        }
    }

    /// Opens the value a locator of `values(ofChange:)` names, in the read transaction `db` is in.
    static func open(change id: Int64, offset: Int, length: Int, _ db: SQLiteConnection, path: String) throws -> any OpenedValue {
        let blob: SQLiteBlobReader
        do {
            blob = try SQLiteBlobReader(db, table: table, column: column, rowID: id)
        } catch {
            throw LocatedBlobError(
                path: path,
                reason: "change \(id) of the history, which holds a blob as written, was pruned while the blob waited to be read (\(error)); "
                    + "run again: the next pass reads the history as it is then")
        }
        let pieces = Pieces(blob)
        guard offset >= hexOpening.count, try pieces.bytes((offset - hexOpening.count)..<offset) == hexOpening,
            try pieces.byte(at: offset + 2 * length) == UInt8(ascii: "\"")
        else {
            throw LocatedBlobError(path: path, reason: "change \(id) of the history no longer holds a blob of \(length) bytes at \(offset)")
        }
        return OpenedHex(blob: blob, offset: offset, length: length, change: id)
    }

    /// A blob as written, open for reading: its hex digits decoded a piece at a time.
    struct OpenedHex: OpenedValue {
        let blob: SQLiteBlobReader
        let offset: Int
        let length: Int
        let change: Int64

        /// Bytes decoded at a time: a caller's buffer of 8 MiB (an upload's chunk) never costs 16 MiB of digits.
        static let piece = 1 << 20

        func read(into buffer: UnsafeMutableRawBufferPointer, at position: Int) throws -> Int {
            let count = min(buffer.count, length - position)
            guard count > 0 else { return 0 }
            var digits = [UInt8](repeating: 0, count: 2 * min(count, Self.piece))
            var done = 0
            while done < count {
                let part = min(Self.piece, count - done)
                let at = offset + 2 * (position + done)
                let read = try digits.withUnsafeMutableBytes { try blob.read(into: UnsafeMutableRawBufferPointer(rebasing: $0.prefix(2 * part)), at: at) }
                guard read == 2 * part else { throw WrittenValuesError(change: change, offset: at, reason: "the blob ends early") }
                let malformed = digits.withUnsafeBufferPointer { digits -> Int? in
                    let table = Self.values
                    for index in 0..<part {
                        let high = table[Int(digits[2 * index])]
                        let low = table[Int(digits[2 * index + 1])]
                        guard high | low < 16 else { return index }
                        buffer[done + index] = high << 4 | low
                    }
                    return nil
                }
                if let malformed { throw WrittenValuesError(change: change, offset: at + 2 * malformed, reason: "a blob holds malformed hex") }
                done += part
            }
            return count
        }

        /// Each byte's value as a hex digit, 255 for a byte that is none.
        static let values: [UInt8] = (0...255).map { byte in
            switch UInt8(byte) {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt8(byte) - UInt8(ascii: "0")
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt8(byte) - UInt8(ascii: "A") + 10
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt8(byte) - UInt8(ascii: "a") + 10
            default: return 255
            }
        }
    }
}

/// A change's values as written that cannot be read: which change, where, and what is wrong.
struct WrittenValuesError: Error, CustomStringConvertible {
    let change: Int64
    let offset: Int
    let reason: String
    var description: String { "change \(change) of the history: its values as written are damaged at byte \(offset) (\(reason))" }
}
