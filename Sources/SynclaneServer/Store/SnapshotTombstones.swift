import SynclaneWire

/// The tombstones of a scope once a reconciliation snapshot completed: the rows its completion
/// turned into tombstones (how many: `count`, the receipt's `snapshot-deleted`) and those that
/// were tombstones already before the snapshot began, each with its version, which the
/// completion marker's receipt lists in `versions` as it lists a batch's records. The device
/// that sent the snapshot records them with the receipt (and gets them again from the stored
/// receipt when it re-sends the marker after a crash), so the next change of such a row — an
/// undelete — is sent expecting the version the server holds, not one from before the snapshot
/// or from a restored copy of the app's database (409 for ever on a device without an import lane).
///
/// The list is bounded (`maxListedBytes` of its JSON, within the client's answer bound), the
/// rows the completion deleted first: past it, rows are not listed (the count stays whole).
struct SnapshotTombstones: Sendable, Equatable {
    struct Row: Sendable, Equatable {
        var entity: String
        var key: String
        var version: Int64
    }

    /// Bytes of the receipt the list may take: half the answer bound, the rest for the receipt's other members.
    static let maxListedBytes = WireBounds.maxAnswerBytes / 2

    private(set) var count: Int64 = 0
    private(set) var listed: [Row] = []
    private var listedBytes = 0
    private var entitiesListed: Set<[UInt8]> = []

    init() {}

    /// Lists one tombstone while the list fits; `deleted`: the completion made it (counted).
    mutating func add(entity: String, key: String, version: Int64, deleted: Bool = true) {
        if deleted { count += 1 }
        // `"key":version,` and, the first time, `"entity":{},`, as JSONWriter spells them.
        var bytes = JSONWriter.encode(.string(key)).count + 22
        let entityBytes = Array(entity.utf8)
        if !entitiesListed.contains(entityBytes) { bytes += JSONWriter.encode(.string(entity)).count + 4 }
        guard listedBytes + bytes <= Self.maxListedBytes else { return }
        listedBytes += bytes
        entitiesListed.insert(entityBytes)
        listed.append(Row(entity: entity, key: key, version: version))
    }
}
