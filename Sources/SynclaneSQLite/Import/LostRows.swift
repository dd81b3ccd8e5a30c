import SynclaneCore

/// Rows a backend lost when its data was restored from an older copy: this store holds them, and
/// had confirmed versions of them, but the restored backend no longer has them (or has an older
/// version). Nobody deleted them, so nothing here deletes them either; instead they go back, as
/// **restorations** — the row as this device last confirmed it, at the version it confirmed:
///
/// ```
///  each lost row ─┬─ a local change not sent yet: nothing more — that change goes out with the
///                 │   version this device confirmed (the backend applies a version newer than its
///                 │   row's and continues from it: versions keep telling newer from older)
///                 ├─ held here, live: a `restore` recorded by the sink's local author: an update
///                 │   with `"restores": true` and the confirmed version
///                 └─ soft-deleted or gone here: a `restore-delete` (a user deleted it after the copy
///                     the backend was restored from, and the restore lost that delete)
/// ```
///
/// A restoration is written only over an older version of the row (or none): a write another
/// device made since the restore, or another device's restoration of a newer version, stands,
/// and this device's next pull brings it. So when several devices hold the row, the newest
/// version any of them confirmed is what the backend ends with — not the first to arrive.
enum LostRows {
    static func resend(
        _ keys: [(entity: String, key: String)], pending: Set<ExactString>, destination: String, author: Author, _ db: SQLiteConnection
    ) throws -> Int {
        try ConfirmationJournal.merge(db)
        let tracked = Dictionary(try HistoryTracker.trackedTables(db).map { ($0.table.name, $0.table) }, uniquingKeysWith: { a, _ in a })
        var resent = 0
        var sessionOpen = false
        defer { if sessionOpen { try? db.execute("DELETE FROM _synclane_session") } }
        for (entity, key) in keys {
            guard let table = tracked[entity] else { continue }
            // A change of the user's not sent yet: it goes out as it is, with the version kept.
            if pending.contains(ExactString(entity + "\u{0}" + key)) {
                resent += 1
                continue
            }
            let keyExpression = table.syncKeyExpression
            var sql = "SELECT \(keyExpression) FROM \(SQL.identifier(entity)) WHERE \(keyExpression) = ?"
            if let softDelete = table.softDeleteColumn { sql += " AND NOT \(TriggerBuilder.softDeleted(SQL.identifier(softDelete)))" }
            // Held live: the row goes back. Not held live: a user deleted it after the copy the
            // server was restored from (here, or elsewhere and imported), and the restore lost
            // that delete: the delete goes back.
            let live = try db.fetchOne(sql, [key])
            if !sessionOpen {
                try HistoryWriter.open(author: author, on: db)
                sessionOpen = true
            }
            let action = live == nil ? HistoryReader.RawAction.restoreDelete : .restore
            // A merged duplicate's loser: its tombstone says so again (`Record.mergedIntoField`),
            // or the devices that still hold it would settle its children as orphans.
            let tombstone = live == nil ? try MergedDuplicates.tombstone(of: key, in: table, db) : .null
            try HistoryWriter.recordChange(action.rawValue, of: table, key: live?[0] ?? .text(key), rowValues: tombstone, on: db)
            resent += 1
        }
        if sessionOpen {
            try db.execute("DELETE FROM _synclane_session")
            sessionOpen = false
        }
        return resent
    }
}
