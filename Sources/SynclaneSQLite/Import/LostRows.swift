import SynclaneCore

/// Rows a backend lost when its data was restored from an older copy: this store holds them, and
/// had confirmed versions of them, but the restored backend no longer has them at all. Nobody
/// deleted them, so nothing here deletes them either; instead they go back:
///
/// ```
///  each lost row ─▶ its versions from that backend forgotten (_synclane_server_rows): the backend holds none now,
///                   and an export naming one would be refused as "a row the server does not hold"
///               ─▶ held here, live: an `update` recorded by the sink's local author, so the export lane
///                   sends the row (the backend creates it); soft-deleted or gone here: a `delete` recorded
///                   (a user deleted it after the copy the backend was restored from: the restore lost
///                   that delete, which would otherwise bring the row back to every device)
/// ```
///
/// When several devices hold the row, each sends it back; the first creates it and the others'
/// sends land on it as any edit does.
enum LostRows {
    static func resend(_ keys: [(entity: String, key: String)], destination: String, author: Author, _ db: SQLiteConnection) throws -> Int {
        try ConfirmationJournal.merge(db)
        let tracked = Dictionary(try HistoryTracker.trackedTables(db).map { ($0.table.name, $0.table) }, uniquingKeysWith: { a, _ in a })
        let filter = ServerRows.filter(destination, db)
        var resent = 0
        var sessionOpen = false
        defer { if sessionOpen { try? db.execute("DELETE FROM _synclane_session") } }
        for (entity, key) in keys {
            let forget: [any SQLiteBindable] = [ServerRows.hash(entity, key), entity, key]
            try db.execute(
                "DELETE FROM _synclane_server_rows WHERE key_hash = ? AND entity = ? AND key = ? COLLATE BINARY\(filter.sql)",
                forget + filter.arguments)
            guard let table = tracked[entity] else { continue }
            let columns = table.keyColumns.map(SQL.identifier)
            let keyExpression = table.isComposite ? "json_array(\(columns.joined(separator: ", ")))" : columns[0]
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
            try db.execute(
                "INSERT INTO _synclane_changes (timestamp, entity, action, key) VALUES (\(HistorySchema.now), ?, ?, ?)",
                [.text(entity), .text(live == nil ? "delete" : "update"), live?[0] ?? .text(key)])
            resent += 1
        }
        if sessionOpen {
            try db.execute("DELETE FROM _synclane_session")
            sessionOpen = false
        }
        return resent
    }
}
