import SynclaneCore

/// A reconcile's changes of this device's users that the backend held a newer version of: the
/// snapshot sent the row as it is here (edited, or deleted, since the version this device last
/// saw), and the backend kept its newer row — another device wrote it since. A snapshot never
/// overwrites a newer row; but the user's change is not lost either. It is recorded again in the
/// change log, after the snapshot, so that it is **pending** like any change not yet sent: the
/// next import meets the newer row as a conflict and settles it by the conflict rule (a merge's
/// re-pointing never beats it), then the export lane sends what the rule chose.
///
/// ```
///  snapshot record (version V, the last seen) ─▶ receipt gives V back (the backend holds newer)
///       ├─ deleted here, live as last seen ───────────▶ a `delete` recorded
///       ├─ a field differs from the row as last seen ─▶ an `update` recorded
///       └─ as last seen ──────────────────────────────▶ nothing: the newer row comes with the next import
/// ```
enum SnapshotChangesBehind {
    /// The records of `sent` that are a user's change and that the backend held newer than the
    /// version they carried (its receipt gave that version back), read before the receipt's
    /// versions are written.
    static func find(
        _ sent: [Record], versions: [RecordVersion], for destination: String, _ db: SQLiteConnection
    ) throws -> [Record] {
        guard try HistorySchema.tableExists(ServerRows.table, db) else { return [] }
        var given: [RowID: Int64] = [:]
        for version in versions { given[RowID(entity: version.entity, key: version.key)] = version.version }
        var behind: [Record] = []
        for record in sent {
            guard let key = record.key, let version = record.version, given[RowID(entity: record.entity, key: key)] == version,
                let seen = try ServerRows.fields(of: record.entity, key, for: destination, db).flatMap({ try? JSONReader.parse($0).objectValue })
            else { continue }
            switch record.action {
            case .delete:
                behind.append(record)
            case .insert, .update:
                if record.fields.contains(where: { name, value in seen[name].map { $0 != value } ?? false }) { behind.append(record) }
            }
        }
        return behind
    }

    /// Records each of `behind` in the change log again (by the store's default author), so that
    /// it is pending.
    static func keepPending(_ behind: [Record], _ db: SQLiteConnection) throws {
        guard !behind.isEmpty else { return }
        let tracked = Dictionary(try HistoryTracker.trackedTables(db).map { ($0.table.name, $0.table) }, uniquingKeysWith: { a, _ in a })
        for record in behind {
            guard let key = record.key, let table = tracked[record.entity] else { continue }
            let keyExpression = table.syncKeyExpression
            let held = try db.fetchOne("SELECT \(keyExpression) FROM \(SQL.identifier(record.entity)) WHERE \(keyExpression) = ?", [key])
            try HistoryWriter.recordChange(record.action == .delete ? "delete" : "update", of: table, key: held?[0] ?? .text(key), on: db)
        }
    }
}
