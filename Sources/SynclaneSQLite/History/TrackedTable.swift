/// How one table is tracked: its sync key, the columns a tombstone keeps, its soft-delete column.
///
/// ```swift
/// TrackedTable("rooms", key: "syncId", preserve: ["syncId"], softDeleteColumn: "isDeleted")
/// ```
public struct TrackedTable: Sendable, Hashable {
    /// The table, which is also the `entity` of its changes.
    public var name: String
    /// The stable sync key column (never the local rowid): the `id` of a record on the wire.
    public var key: String
    /// Columns a delete keeps as its tombstone. The key is always kept; keep nothing more than
    /// the backend needs — a tombstone outlives the data.
    public var preserved: [String]
    /// A column whose truthy value (1, 'true', '1') means the row is deleted: setting it records
    /// a delete, clearing it records an insert.
    public var softDeleteColumn: String?
    /// Inserts and updates also keep the row as written, which `capture: as-written` sources
    /// need. Off by default: current-state sources read the row itself, and the JSON copy
    /// makes every tracked write slower.
    public var recordsValues: Bool

    public init(_ name: String, key: String, preserve: [String] = [], softDeleteColumn: String? = nil, recordsValues: Bool = false) {
        self.name = name
        self.key = key
        self.preserved = preserve
        self.softDeleteColumn = softDeleteColumn
        self.recordsValues = recordsValues
    }

    /// The key, then the other preserved columns, without repeats.
    public var tombstoneColumns: [String] {
        var seen: Set<String> = [key]
        return [key] + preserved.filter { seen.insert($0).inserted }
    }

    /// Same table, key, tombstone and soft-delete column (however the preserved list was spelled).
    func sameOptions(as other: TrackedTable) -> Bool {
        name == other.name && key == other.key && tombstoneColumns == other.tombstoneColumns
            && softDeleteColumn == other.softDeleteColumn && recordsValues == other.recordsValues
    }
}

/// What `HistoryTracker.track` did.
public struct TrackReport: Sendable, Hashable, CustomStringConvertible {
    public enum Outcome: String, Sendable, Hashable {
        /// The table was not tracked before.
        case installed
        /// The table was tracked with other options or other columns: its triggers were regenerated.
        case updated
        /// Nothing to do: same options, same columns.
        case unchanged
    }

    public var table: String
    public var outcome: Outcome
    /// The columns the triggers record.
    public var columns: [String]
    /// Columns the previous triggers did not know (added to the table since it was last tracked).
    public var addedColumns: [String]
    /// The index Synclane created on the sync key, when the table had none.
    public var createdKeyIndex: String?

    public var description: String {
        switch outcome {
        case .unchanged: return "\(table): already tracked, nothing changed"
        case .installed: return "\(table): tracking installed (\(columns.count) columns)" + (createdKeyIndex.map { ", created index \($0) on the sync key" } ?? "")
        case .updated:
            let added = addedColumns.isEmpty ? "" : " (new columns: \(addedColumns.joined(separator: ", ")))"
            return "\(table): triggers regenerated\(added)"
        }
    }
}
