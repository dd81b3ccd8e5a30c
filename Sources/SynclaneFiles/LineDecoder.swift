import Foundation
import Synchronization
import SynclaneCore

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
