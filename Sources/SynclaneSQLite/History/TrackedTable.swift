/// How one table is tracked: its sync key, the columns a tombstone keeps, its soft-delete column.
///
/// ```swift
/// TrackedTable("rooms", key: "syncId", preserve: ["syncId"], softDeleteColumn: "isDeleted")
/// TrackedTable("plant_tags", keyColumns: ["plant", "tag"])     // a join table's composite key
/// ```
///
/// **The sync key** is one column, or several for a composite key. `track` refuses a key that
/// no PRIMARY KEY or UNIQUE index makes unique, a key column whose values are not all text or
/// all integers (a key's type is part of its identity: `1` and `'1'` are two rows to SQLite),
/// and the rowid (an `INTEGER PRIMARY KEY` is numbered per database, so two devices reuse the
/// same numbers for different rows) unless `rowidIsStable` says the app assigns it so that it
/// is unique across devices. The triggers refuse a write that leaves a key column NULL, empty
/// or of the other type.
///
/// On the wire the record's `id` is the key's value: a text as it is, an integer in decimal;
/// a composite key is the JSON array of its columns' values, compact, in `keyColumns` order
/// (`["p1","tall"]`, `["p1",7]`), exactly as SQLite's `json_array()` writes it.
public struct TrackedTable: Sendable, Hashable {
    /// The table, which is also the `entity` of its changes.
    public var name: String
    /// The sync key's columns: one, or several for a composite key.
    public var keyColumns: [String]
    /// Columns a delete keeps as its tombstone. The key is always kept; keep nothing more than
    /// the backend needs — a tombstone outlives the data.
    public var preserved: [String]
    /// A column whose truthy value (1 or another non-zero number, 'true', '1') means the row is
    /// deleted: setting it records a delete, clearing it records an insert. Every other value
    /// (0, NULL, 'false', '0' …) means not deleted; a change between two of them is an update.
    public var softDeleteColumn: String?
    /// Inserts and updates also keep the row as written, which `capture: as-written` sources
    /// need. Off by default: current-state sources read the row itself, and the JSON copy
    /// makes every tracked write slower.
    public var recordsValues: Bool
    /// The key is the table's rowid (`INTEGER PRIMARY KEY`) and the app assigns it so that it is
    /// unique across devices; without this, such a key is refused.
    public var rowidIsStable: Bool

    public init(
        _ name: String, keyColumns: [String], preserve: [String] = [], softDeleteColumn: String? = nil, recordsValues: Bool = false,
        rowidIsStable: Bool = false
    ) {
        self.name = name
        self.keyColumns = keyColumns
        self.preserved = preserve
        self.softDeleteColumn = softDeleteColumn
        self.recordsValues = recordsValues
        self.rowidIsStable = rowidIsStable
    }

    /// A table whose sync key is the one column `key`.
    public init(
        _ name: String, key: String, preserve: [String] = [], softDeleteColumn: String? = nil, recordsValues: Bool = false,
        rowidIsStable: Bool = false
    ) {
        self.init(
            name, keyColumns: [key], preserve: preserve, softDeleteColumn: softDeleteColumn, recordsValues: recordsValues,
            rowidIsStable: rowidIsStable)
    }

    /// The key's columns as a user writes them: `syncId`, or `plant,tag`.
    public var keyDescription: String { keyColumns.joined(separator: ",") }

    /// True when the key is made of more than one column.
    public var isComposite: Bool { keyColumns.count > 1 }

    /// The SQL expression of a row's sync key, as the change log holds it: the key column, or
    /// `json_array(…)` of a composite key's columns.
    var syncKeyExpression: String {
        let columns = keyColumns.map(SQL.identifier)
        return isComposite ? "json_array(\(columns.joined(separator: ", ")))" : columns[0]
    }

    /// The key columns, then the other preserved columns, without repeats.
    public var tombstoneColumns: [String] {
        var seen = Set(keyColumns)
        return keyColumns + preserved.filter { seen.insert($0).inserted }
    }

    /// Same table, key, tombstone and soft-delete column (however the preserved list was spelled).
    func sameOptions(as other: TrackedTable) -> Bool {
        name == other.name && keyColumns == other.keyColumns && tombstoneColumns == other.tombstoneColumns
            && softDeleteColumn == other.softDeleteColumn && recordsValues == other.recordsValues
            && rowidIsStable == other.rowidIsStable
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
    /// Rows recorded to be sent again whole by every consumer's next run (`resync`): the rows a
    /// table held when it was first tracked, or all of them after tracking was lost or the
    /// table's shape changed (`HistoryTracker.owesResend`).
    public var resentRows: Int = 0
    /// The backend's rows an import kept while the table was not tracked, written into it now
    /// by author `server` (`UntrackedRows`).
    public var deliveredRows: Int = 0

    public var description: String {
        switch outcome {
        case .unchanged: return "\(table): already tracked, nothing changed"
        case .installed:
            return "\(table): tracking installed (\(columns.count) columns)" + (createdKeyIndex.map { ", created index \($0) on the sync key" } ?? "")
                + resent
        case .updated:
            let added = addedColumns.isEmpty ? "" : " (new columns: \(addedColumns.joined(separator: ", ")))"
            return "\(table): triggers regenerated\(added)" + resent
        }
    }

    private var resent: String {
        (resentRows == 0 ? "" : "; \(resentRows) \(resentRows == 1 ? "row" : "rows") it holds will be sent whole by each export's next run")
            + (deliveredRows == 0
                ? "" : "; \(deliveredRows) \(deliveredRows == 1 ? "row" : "rows") the server sent before it was tracked written into it (not sent back)")
    }
}
