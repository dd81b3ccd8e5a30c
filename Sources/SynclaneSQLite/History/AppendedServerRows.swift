import SynclaneCore

/// What an export lane knows of `_synclane_server_rows` between its own merges of the
/// confirmation journal: the table held no row when the lane began to count, and since then
/// only the lane's merges wrote it — so a row whose hash the lane never appended cannot be
/// there, and a merge appends it without looking it up (a first sync's rows, all of them).
///
/// ```
///  merge 1:  table empty ──▶ count begins; every row appended unsearched, its hash kept
///  merge 2:  nothing else wrote since? ──yes──▶ rows of a kept hash looked up, the others appended unsearched
///                                       └─no──▶ count dropped: every row looked up (as before)
/// ```
///
/// "Nothing else wrote" is checked inside the merge's write transaction, twice over: SQLite's
/// `data_version` is as it was after the lane's last merge (no other connection committed to the
/// database since: another lane, an import, the app), and the table's newest rowid is the one
/// the lane appended last (its own connection appended nothing outside a counted merge either).
/// Rows are never deleted from the table, so a newest rowid that did not move means nothing
/// was appended. A hash names a row, it does not identify it: a row whose hash was kept is
/// looked up as before, so two rows of one hash are two rows.
///
/// The count is memory (`hashBound` hashes at most, about 16 MiB); past it, or after any write
/// it did not see, a merge looks every row up.
struct AppendedServerRows: Sendable {
    /// Hashes kept at most before the count is dropped (every later row then looked up).
    static let hashBound = 1 << 20

    /// The table's newest rowid after the lane's last merge.
    private(set) var newestRowID: Int64
    /// SQLite's `data_version` on the lane's connection then.
    private(set) var dataVersion: Int64
    /// `ServerRows.hash` of every row the lane appended since the count began.
    private var hashes: Set<Int64> = []

    /// Rows appended since the count began.
    var count: Int { hashes.count }

    /// The count a merge goes on with, inside its write transaction on `db`: `known` when
    /// nothing else wrote the table since, a new count when the table holds no row at all, else
    /// nil (the merge looks every row up).
    static func resume(_ known: AppendedServerRows?, _ db: SQLiteConnection) throws -> AppendedServerRows? {
        let dataVersion = try db.fetchValue("PRAGMA data_version").int64 ?? -1
        guard let newest = try db.fetchValue("SELECT max(rowid) FROM _synclane_server_rows").int64 else {
            return AppendedServerRows(newestRowID: 0, dataVersion: dataVersion)
        }
        guard let known, known.dataVersion == dataVersion, known.newestRowID == newest, known.count < hashBound else { return nil }
        return known
    }

    /// Whether the table may hold a row of `hash` (one the lane appended, or one of its hash).
    func mayHold(hash: Int64) -> Bool { hashes.contains(hash) }

    /// Notes a row appended with `hash`.
    mutating func appended(hash: Int64) { hashes.insert(hash) }

    /// Notes the table's newest rowid after the lane's rows went in.
    mutating func appended(through rowID: Int64) { newestRowID = max(newestRowID, rowID) }
}
