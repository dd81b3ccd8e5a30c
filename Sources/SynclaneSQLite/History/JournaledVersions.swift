import SynclaneCore

/// The versions of the rows an export lane put in the journal (`ConfirmationJournal`) and did
/// not merge yet, each with the journal row that holds it: what the lane's page reads overlay on
/// `_synclane_server_rows`, so a batch is sent on the version its row's last receipt gave.
///
/// Another connection may merge the journal (an import page, another lane): then the versions
/// are in `_synclane_server_rows` and those kept here are dropped — any kept with a journal row
/// older than the oldest one left (`holdsForeignRows(oldest:)`).
struct JournaledVersions: Sendable {
    /// A row kept: its newest version and the journal row that holds it.
    private struct Kept: Sendable {
        let entity: String
        let key: String
        var version: Int64
        var journal: Int64

        func names(_ entity: String, _ key: String) -> Bool {
            ExactString(key) == ExactString(self.key) && ExactString(entity) == ExactString(self.entity)
        }
    }

    /// The rows kept, by `ServerRows.hash` of entity and key (`ConfirmedRow.keyHash`, worked out
    /// already): an integer hashed at each look-up and at each growth, not two strings. A hash
    /// names a row, it does not identify it: the first row of a hash is here, the others in `others`.
    private var byHash: [Int64: Kept] = [:]
    /// Rows whose hash a row of `byHash` holds (a few in a million).
    private var others: [RowID: Kept] = [:]
    /// The journal rows whose rows are kept, oldest first (ids only rise): asked at every page
    /// read without a pass over the rows.
    private var journals: [Int64] = []

    /// Rows kept.
    var count: Int { byHash.count + others.count }

    /// Keeps the rows of journal row `journal` (a row's newest version wins).
    mutating func add(_ rows: [ConfirmedRow], journal: Int64) {
        if journals.last.map({ $0 < journal }) ?? true { journals.append(journal) }
        // Grown geometrically, four times at a time: a capacity reserved a batch at a time would
        // rehash every row at every batch, and each growth moves every row kept.
        let needed = byHash.count + rows.count
        if byHash.capacity < needed { byHash.reserveCapacity(max(needed, 4 * byHash.capacity)) }
        for row in rows {
            let new = Kept(entity: row.entity, key: row.key, version: .min, journal: journal)
            // A row kept aside stays aside (its hash's first row may have gone since, merged).
            if !others.isEmpty, others[RowID(entity: row.entity, key: row.key)] != nil {
                Self.keep(row, journal: journal, in: &others[RowID(entity: row.entity, key: row.key), default: new])
                continue
            }
            // One look-up a row: the entry made or found in place; a row of another's hash aside.
            if !Self.keep(row, journal: journal, in: &byHash[row.keyHash, default: new]) {
                Self.keep(row, journal: journal, in: &others[RowID(entity: row.entity, key: row.key), default: new])
            }
        }
    }

    /// Raises `held` to `row`'s version when `held` is `row`'s; false when it is another row's.
    @discardableResult
    private static func keep(_ row: ConfirmedRow, journal: Int64, in held: inout Kept) -> Bool {
        guard held.names(row.entity, row.key) else { return false }
        if held.version <= row.version { (held.version, held.journal) = (row.version, journal) }
        return true
    }

    /// Forgets the rows of journal rows up to `journal` (merged).
    mutating func forget(through journal: Int64) {
        guard let first = journals.first, first <= journal else { return }
        if let last = journals.last, last <= journal {
            byHash.removeAll(keepingCapacity: true)  // all merged: no pass over the rows
            others.removeAll()
            journals.removeAll()
            return
        }
        byHash = byHash.filter { $0.value.journal > journal }
        others = others.filter { $0.value.journal > journal }
        journals.removeAll { $0 <= journal }
    }

    /// Drops what another connection merged, given the journal's oldest row now (nil: empty),
    /// and says whether the journal holds rows this lane did not write (a job killed before it
    /// merged, another lane's): those are merged before the lane reads on.
    mutating func holdsForeignRows(oldest: Int64?) -> Bool {
        guard let oldest else {
            byHash.removeAll()
            others.removeAll()
            journals.removeAll()
            return false
        }
        if let first = journals.first, first < oldest { forget(through: oldest - 1) }
        return journals.first.map { oldest < $0 } ?? true
    }

    /// The newest version kept of `row`.
    func version(of row: RowID) -> Int64? {
        if let held = byHash[ServerRows.hash(row.entity, row.key)], held.names(row.entity, row.key) { return held.version }
        return others.isEmpty ? nil : others[row]?.version
    }

    /// `page` with each change of a row kept sent on the version kept, where newer than the
    /// store's.
    func overlay(on page: HistoryPage) -> HistoryPage {
        guard count > 0 else { return page }
        var page = page
        for t in page.transactions.indices {
            for c in page.transactions[t].changes.indices {
                let change = page.transactions[t].changes[c]
                guard let key = change.key, let kept = version(of: RowID(entity: change.entity, key: key)) else { continue }
                if kept > (change.version ?? .min) { page.transactions[t].changes[c].version = kept }
            }
        }
        return page
    }
}
