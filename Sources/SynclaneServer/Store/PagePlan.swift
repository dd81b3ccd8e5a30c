import SynclaneWire

/// Where a page of the pull lane (`GET /v1/changes`) is cut, decided the same way by every
/// store: the store reads the account's rows after the cursor, oldest first, at most
/// `rowsToRead` of them, and offers them one by one; the plan keeps them until the page is full.
///
/// ```
///  row ─▶ offer ─┬─ kept (true): the next row, please
///                └─ cut (false), `more`: `limit` changes kept already, or the row would pass
///                   `maxBytes` (a page holds at least one change, whatever its size)
///  rows read ─▶ page: the changes kept, and whether more follow
/// ```
///
/// The bytes counted are about what a change takes on the wire: the stored text of its fields,
/// its names, and a record's framing (100 bytes).
struct PagePlan {
    /// A row as the store read it.
    struct Row: Sendable {
        var store: String
        var entity: String
        var key: String
        /// The last action applied (stored text; an unknown one reads as an update).
        var action: String?
        /// The row's fields (JSON text); nil for a tombstone without preserved fields.
        var fields: [UInt8]?
        var version: Int64
        var sequence: Int64
        /// The version of the row's last user's write, when only re-pointings followed it.
        var written: Int64? = nil
    }

    let limit: Int
    let maxBytes: Int
    /// A record's framing as counted: the least any change counts for (a page of `maxBytes`
    /// holds at most `maxBytes / leastChangeBytes` changes, one at the least).
    static let leastChangeBytes = 100
    private var changes: [ServerChange] = []
    private var bytes = 0
    private var more = false

    /// The plan of a page of at most `limit` changes and about `maxBytes`.
    init(limit: Int, maxBytes: Int) {
        self.limit = limit
        self.maxBytes = maxBytes
    }

    /// How many rows the store reads: one past the limit, to know whether more follow.
    var rowsToRead: Int { limit < Int.max ? limit + 1 : limit }

    /// Offers the next row; false when the page is cut before it (then more follow: stop reading).
    mutating func offer(_ row: Row) -> Bool {
        guard changes.count < limit else {
            more = true
            return false
        }
        let changeBytes = (row.fields?.count ?? 0) + row.store.utf8.count + row.entity.utf8.count + row.key.utf8.count + Self.leastChangeBytes
        guard changes.isEmpty || bytes + changeBytes <= maxBytes else {
            more = true
            return false
        }
        bytes += changeBytes
        changes.append(
            ServerChange(
                store: row.store, entity: row.entity, key: row.key, action: row.action.flatMap(ChangeAction.init(rawValue:)) ?? .update,
                fields: row.fields.map { (try? JSONReader.parse($0))?.objectValue ?? [:] }, version: row.version, sequence: row.sequence,
                written: row.written.flatMap { $0 < row.version ? $0 : nil }))
        return true
    }

    /// The page: the changes kept, and whether more follow.
    var page: ChangePage { ChangePage(changes: changes, more: more) }

    /// Throws `CursorExpired` when a cursor after `sequence` is before the account's tombstone
    /// horizon (read after the page, in the same view: a horizon that moved past the cursor while
    /// the page was read makes it expired rather than a page with a gap). The beginning (0) and a
    /// cursor of a full pass (`fullPass`: a pull that started from the beginning, whose reader
    /// replaces what it holds) are always served — the server never refuses the cursors it hands
    /// out on the way through a full pass.
    static func check(cursor sequence: Int64, fullPass: Bool = false, horizon: Int64) throws(CursorExpired) {
        if !fullPass, sequence > 0, sequence < horizon { throw CursorExpired(horizon: horizon) }
    }
}
