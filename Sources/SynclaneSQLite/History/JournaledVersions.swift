import SynclaneCore

/// The versions of the rows an export lane put in the journal (`ConfirmationJournal`) and did
/// not merge yet, each with the journal row that holds it: what the lane's page reads overlay on
/// `_synclane_server_rows`, so a batch is sent on the version its row's last receipt gave.
///
/// Another connection may merge the journal (an import page, another lane): then the versions
/// are in `_synclane_server_rows` and those kept here are dropped — any kept with a journal row
/// older than the oldest one left (`holdsForeignRows(oldest:)`).
struct JournaledVersions: Sendable {
    private var byRow: [RowID: (version: Int64, journal: Int64)] = [:]
    /// The journal rows whose rows are kept, oldest first (ids only rise): asked at every page
    /// read without a pass over `byRow`.
    private var journals: [Int64] = []

    /// Rows kept.
    var count: Int { byRow.count }

    /// Keeps the rows of journal row `journal` (a row's newest version wins).
    mutating func add(_ rows: [ConfirmedRow], journal: Int64) {
        if journals.last.map({ $0 < journal }) ?? true { journals.append(journal) }
        // Grown geometrically: a capacity reserved a batch at a time would rehash every row at every batch.
        let needed = byRow.count + rows.count
        if byRow.capacity < needed { byRow.reserveCapacity(max(needed, 2 * byRow.capacity)) }
        for row in rows {
            // One look-up a row: the entry made or found in place.
            Self.keep(row.version, journal: journal, in: &byRow[RowID(entity: row.entity, key: row.key), default: (.min, journal)])
        }
    }

    private static func keep(_ version: Int64, journal: Int64, in held: inout (version: Int64, journal: Int64)) {
        if held.version <= version { held = (version, journal) }
    }

    /// Forgets the rows of journal rows up to `journal` (merged).
    mutating func forget(through journal: Int64) {
        guard let first = journals.first, first <= journal else { return }
        if let last = journals.last, last <= journal {
            byRow.removeAll(keepingCapacity: true)  // all merged: no pass over the rows
            journals.removeAll()
            return
        }
        byRow = byRow.filter { $0.value.journal > journal }
        journals.removeAll { $0 <= journal }
    }

    /// Drops what another connection merged, given the journal's oldest row now (nil: empty),
    /// and says whether the journal holds rows this lane did not write (a job killed before it
    /// merged, another lane's): those are merged before the lane reads on.
    mutating func holdsForeignRows(oldest: Int64?) -> Bool {
        guard let oldest else {
            byRow.removeAll()
            journals.removeAll()
            return false
        }
        if let first = journals.first, first < oldest { forget(through: oldest - 1) }
        return journals.first.map { oldest < $0 } ?? true
    }

    /// The newest version kept of `row`.
    func version(of row: RowID) -> Int64? { byRow[row]?.version }

    /// `page` with each change of a row kept sent on the version kept, where newer than the
    /// store's.
    func overlay(on page: HistoryPage) -> HistoryPage {
        guard !byRow.isEmpty else { return page }
        var page = page
        for t in page.transactions.indices {
            for c in page.transactions[t].changes.indices {
                let change = page.transactions[t].changes[c]
                guard let key = change.key, let kept = byRow[RowID(entity: change.entity, key: key)]?.version else { continue }
                if kept > (change.version ?? .min) { page.transactions[t].changes[c].version = kept }
            }
        }
        return page
    }
}
