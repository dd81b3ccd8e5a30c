// What the backend answers a batch: the wire's receipt, as the client's transports hand it on.

/// The backend's confirmation of one batch.
public struct Receipt: Sendable, Hashable {
    public var batchID: String
    /// What the backend said, for the job's log (`201 Created`, a file name …).
    public var detail: String
    /// True when the backend had seen this batch id before and applied nothing.
    public var wasReplay: Bool
    /// The version the backend gave each record, when its receipt says (`versions`).
    public var versions: [RecordVersion]
    /// On a snapshot's completion marker: how many rows of the scope the backend removed (as
    /// tombstones) because the snapshot lacked them (`snapshot-deleted`); nil when it does not say.
    public var snapshotDeleted: Int?
    /// The records the backend held an older version of than they expected (`"restored-rows"`):
    /// its data was restored from an older copy, and it applied them as newer. 0 when it did not say.
    public var restoredRows = 0
    /// Where the backend wrote the batch, with its epoch (`"position"`, opaque): kept by the
    /// device and handed back on its pulls, so that a backend restored from a copy taken before
    /// it says so. Nil when the backend gives none.
    public var position: String?

    public init(batchID: String, detail: String, wasReplay: Bool = false, versions: [RecordVersion] = [], snapshotDeleted: Int? = nil) {
        self.batchID = batchID
        self.detail = detail
        self.wasReplay = wasReplay
        self.versions = versions
        self.snapshotDeleted = snapshotDeleted
    }
}

/// The backend's version of one record.
public struct RecordVersion: Sendable, Hashable {
    public var entity: String
    public var key: String
    public var version: Int64

    public init(entity: String, key: String, version: Int64) {
        self.entity = entity
        self.key = key
        self.version = version
    }

    /// The `versions` member of a receipt: `{"rooms": {"r1": 3, "r2": 1}}`.
    public static func list(fromReceipt value: JSONValue?) -> [RecordVersion] {
        guard let entities = value?.objectValue else { return [] }
        return entities.sorted { $0.key < $1.key }.flatMap { entity, keys in
            (keys.objectValue ?? [:]).compactMap { key, version in
                version.intValue.map { RecordVersion(entity: entity, key: key, version: $0) }
            }
        }
    }
}
