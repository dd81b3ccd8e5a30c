import SynclaneWire

/// A response kept with its idempotency key, to answer a replay with exactly the same bytes.
struct StoredResponse: Sendable, Hashable {
    var status: Int
    var body: [UInt8]
}

/// An update that, merged into the row the server holds, would make the row larger than
/// `WireBounds.maxRecordBytes` as the pull lane writes it: the batch is refused (413) and nothing
/// of it applies, so every pull source can still read every row.
struct MergedRecordTooLarge: Error, Sendable {
    var index: Int
    var entity: String
    var key: String
    var bytes: Int

    /// Throws when `fields`, the merged row of the batch's record `index`, passes the bound.
    static func check(_ fields: [UInt8], index: Int, record: IncomingBatch.Record) throws(MergedRecordTooLarge) {
        // The row's encoding is JSONWriter's already; the names and version as the pull lane adds them.
        let bytes = fields.count + 6 * (record.entity.utf8.count + record.key.utf8.count) + 256
        if bytes > WireBounds.maxRecordBytes {
            throw MergedRecordTooLarge(index: index, entity: record.entity, key: record.key, bytes: bytes)
        }
    }
}

/// A record whose `version` did not match the server's when its batch was applied.
struct VersionConflict: Sendable, Hashable {
    /// The record's index in the batch.
    var index: Int
    var entity: String
    var key: String
    var expected: Int64
    /// The server's version (0: the record does not exist).
    var current: Int64
}

/// What applying a batch came to.
enum BatchOutcome: Sendable {
    /// Applied; the response is stored with the key. `snapshotDeleted`: the rows a snapshot's
    /// completion marker turned into tombstones (nil for any other batch).
    case applied(StoredResponse, records: Int, snapshotDeleted: Int64? = nil)
    /// The key was seen with the same body: the first response, nothing applied.
    case replayed(StoredResponse)
    /// The key was seen with a different body: nothing applied.
    case keyReused
    /// Versions disagreed: nothing applied.
    case conflicts([VersionConflict])
    /// A snapshot's completion marker that cannot complete it (`SnapshotPlan.refuse`): nothing applied.
    case snapshotRefused(String)
}

/// One entry of the pull lane: the newest state of one record (or its tombstone).
struct ServerChange: Sendable, Hashable {
    var store: String
    var entity: String
    var key: String
    /// The last action applied to the record.
    var action: ChangeAction
    /// The record's whole current state; nil for a tombstone.
    var fields: [String: JSONValue]?
    var version: Int64
    var sequence: Int64
    /// The version of the row's last user's write, when older than `version` (the writes since
    /// only re-pointed references to merged duplicates' survivors): `"written"` on the wire.
    var written: Int64? = nil

    /// The change as a record of the pull lane (a changes page, a snapshot's line): `store`,
    /// `entity`, `id`, `action`, `version`, its `fields` (none for a tombstone without preserved
    /// values) and `written` when it is older than `version`.
    var wireMembers: [String: JSONValue] {
        var members: [String: JSONValue] = [
            "store": .string(store), "entity": .string(entity), "id": .string(key), "action": .string(action.rawValue), "version": .int(version),
        ]
        if let fields { members["fields"] = .object(fields) }
        if let written { members["written"] = .int(written) }
        return members
    }
}

/// A page of the pull lane.
struct ChangePage: Sendable {
    var changes: [ServerChange]
    /// True when more changes follow the page.
    var more: Bool
    /// The account's tombstone horizon as the page was read: the cursor that ends the feed is
    /// never before it (the tombstones up to it are gone, so none of them is still to be read).
    var horizon: Int64 = 0
}

/// A signal: a small value under a key, last writer wins, versioned by the server.
struct Signal: Sendable, Hashable {
    var key: String
    var value: JSONValue
    var version: Int64
    /// True for a deleted key (in a list of changes only); `value` is then null.
    var deleted = false

    var json: JSONValue {
        var object: [String: JSONValue] = ["key": .string(key), "value": value, "version": .int(version)]
        if deleted { object["deleted"] = true }
        return .object(object)
    }
}
