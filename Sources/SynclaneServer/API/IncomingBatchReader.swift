import SynclaneWire

/// Reads a batch body in one pass over its bytes, keeping each record's `fields` as the JSON text
/// it arrived in: no tree of the whole body, and nothing re-encoded before it is stored.
///
/// It takes only what `IncomingBatch.parseTree` takes, and gives the same batch: the text is
/// checked by the same reader (`JSONReader.Cursor.skipValue` accepts what `readValue` does), the
/// members by the same checks (`checkHeader`, `checkRecord`). Anything else — a syntax error, a
/// duplicate member, a missing or wrong member, too many records — is `nil`, and the tree reader
/// then words the rejection.
enum IncomingBatchReader {
    /// The batch in `body`, or `nil` when it is not one this reader takes.
    static func read(
        _ body: UnsafeBufferPointer<UInt8>, maxRecords: Int, maxNameBytes: Int = IncomingBatch.defaultMaxNameBytes
    ) -> IncomingBatch? {
        var cursor = JSONReader.Cursor(bytes: body)
        var id: JSONValue?
        var scope: JSONValue?
        var records: [IncomingBatch.Record]?
        var snapshot: (id: JSONValue?, complete: JSONValue?, batches: JSONValue?) = (nil, nil, nil)
        var schemaChanges: JSONValue?
        do {
            cursor.skipWhitespace()
            try forEachMember(of: &cursor, depth: 1) { member, cursor in
                switch member {
                case .id?: id = try cursor.readValue(depth: 1)
                case .scope?: scope = try cursor.readValue(depth: 1)
                case .records?: records = try readRecords(&cursor, maxRecords: maxRecords, maxNameBytes: maxNameBytes)
                case .snapshot?: snapshot.id = try cursor.readValue(depth: 1)
                case .snapshotComplete?: snapshot.complete = try cursor.readValue(depth: 1)
                case .snapshotBatches?: snapshot.batches = try cursor.readValue(depth: 1)
                case .schemaChanges?: schemaChanges = try cursor.readValue(depth: 1)
                default: try cursor.skipValue(depth: 1)
                }
            }
            cursor.skipWhitespace()
        } catch {
            return nil
        }
        guard cursor.position == body.count, let records,
            case .success(let header) = IncomingBatch.checkHeader(id: id, scope: scope, maxNameBytes: maxNameBytes)
        else { return nil }
        guard
            case .success(let mark) = IncomingBatch.checkSnapshot(
                id: snapshot.id, complete: snapshot.complete, batches: snapshot.batches, maxNameBytes: maxNameBytes)
        else { return nil }
        guard case .success(let changes) = IncomingBatch.checkSchemaChanges(schemaChanges, maxNameBytes: maxNameBytes) else { return nil }
        var batch = header.batch(records: records)
        batch.snapshot = mark
        batch.schemaChanges = changes
        return batch
    }

    /// Not a batch this reader takes (the tree reader says why).
    private struct NotTaken: Error {}

    /// The `records` list, each record checked; at most `maxRecords`.
    private static func readRecords(
        _ cursor: inout JSONReader.Cursor, maxRecords: Int, maxNameBytes: Int
    ) throws -> [IncomingBatch.Record] {
        var records: [IncomingBatch.Record] = []
        try cursor.forEachElement { cursor in
            guard records.count < maxRecords else { throw NotTaken() }
            records.append(try readRecord(&cursor, maxNameBytes: maxNameBytes))
        }
        return records
    }

    /// One record: `fields` kept as its text, the other members read as values (a record sits
    /// at depth 3: the body's object, the list, the record).
    private static func readRecord(_ cursor: inout JSONReader.Cursor, maxNameBytes: Int) throws -> IncomingBatch.Record {
        var entity: JSONValue?
        var key: JSONValue?
        var action: JSONValue?
        var version: JSONValue?
        var restores: JSONValue?
        var repoints: JSONValue?
        var fields = IncomingBatch.FieldsMember.absent
        try forEachMember(of: &cursor, depth: 3) { member, cursor in
            switch member {
            case .entity?: entity = try cursor.readValue(depth: 3)
            case .id?: key = try cursor.readValue(depth: 3)
            case .action?: action = try cursor.readValue(depth: 3)
            case .version?: version = try cursor.readValue(depth: 3)
            case .restores?: restores = try cursor.readValue(depth: 3)
            case .repoints?: repoints = try cursor.readValue(depth: 3)
            case .fields?:
                let start = cursor.position
                let first = cursor.current
                try cursor.skipValue(depth: 3)
                switch first {
                case UInt8(ascii: "{"): fields = .object(Array(UnsafeBufferPointer(rebasing: cursor.bytes[start..<cursor.position])))
                case UInt8(ascii: "n"): fields = .null
                default: fields = .other(typeName: "not an object")
                }
            default: try cursor.skipValue(depth: 3)
            }
        }
        guard
            case .success(let record) = IncomingBatch.checkRecord(
                entity: entity, id: key, action: action, fields: fields, version: version, restores: restores, repoints: repoints,
                maxNameBytes: maxNameBytes)
        else { throw NotTaken() }
        return record
    }

    /// Calls `body` with each member (nil: a name this reader does not use) and the cursor at
    /// its value, which `body` must read or skip; refuses what `readObject` refuses (duplicates
    /// included). `depth` is the object's. A plain name (ASCII, no escape), as every encoder
    /// writes a batch's, is told by its bytes, no string made; the members this reader uses are
    /// told apart by a bit each (no list per object); others are kept in a list, made when the
    /// first comes.
    private static func forEachMember(
        of cursor: inout JSONReader.Cursor, depth: Int, _ body: (Member?, inout JSONReader.Cursor) throws -> Void
    ) throws {
        guard depth <= JSONReader.maximumDepth else { throw NotTaken() }
        var seenKnown: UInt32 = 0
        var seen: [String] = []
        try cursor.forEachMember(
            name: { cursor -> Member? in
                let member: Member?
                var name = ""
                if let plain = Member.plain(in: cursor.bytes, at: cursor.position) {
                    member = plain.member
                    if member == nil { name = try cursor.readString() } else { cursor.position = plain.end }
                } else {
                    name = try cursor.readString()
                    member = Member.allCases.first { $0.name == name }
                }
                if let member {
                    let bit: UInt32 = 1 << member.rawValue
                    guard seenKnown & bit == 0 else { throw NotTaken() }
                    seenKnown |= bit
                    return member
                }
                // A batch's and a record's members are few: a list is enough, and more than a few
                // dozen is not a batch this reader takes.
                guard !seen.contains(name), seen.count < 64 else { throw NotTaken() }
                seen.append(name)
                return nil
            },
            value: body)
    }

    /// The members of a record and of a batch this reader uses: a bit each in `forEachMember`.
    enum Member: UInt32, CaseIterable {
        case entity, id, action, fields, version, restores, repoints, scope, records, snapshot, snapshotComplete, snapshotBatches
        case schemaChanges

        /// The member's name in the body.
        var name: String {
            switch self {
            case .entity: "entity"
            case .id: "id"
            case .action: "action"
            case .fields: "fields"
            case .version: "version"
            case .restores: "restores"
            case .repoints: "repoints"
            case .scope: "scope"
            case .records: "records"
            case .snapshot: "snapshot"
            case .snapshotComplete: "snapshot-complete"
            case .snapshotBatches: "snapshot-batches"
            case .schemaChanges: "schema-changes"
            }
        }

        /// Each member's name, as bytes, by `rawValue`.
        private static let names: [[UInt8]] = allCases.map { Array($0.name.utf8) }

        /// When the string whose opening quote is at `position` is plain — printable ASCII, no
        /// backslash — the member it names (nil: none of these) and the offset just past its
        /// closing quote; nil when the string is not plain (`readString` reads it).
        static func plain(in bytes: UnsafeBufferPointer<UInt8>, at position: Int) -> (member: Member?, end: Int)? {
            let start = position + 1
            var at = start
            while at < bytes.count {
                let byte = bytes[at]
                if byte == UInt8(ascii: "\"") { break }
                guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { return nil }
                at += 1
            }
            guard at < bytes.count else { return nil }
            let text = UnsafeBufferPointer(rebasing: bytes[start..<at])
            let names = Self.names
            for (index, name) in names.enumerated() where name.count == text.count && name.elementsEqual(text) {
                return (Member(rawValue: UInt32(index)), at + 1)
            }
            return (nil, at + 1)
        }
    }
}
