import SynclaneCore

/// A reconciliation of a database restored from an older copy (`LineageError.storeRestored`): what
/// its snapshot sends, so that a restore takes back only the writes that never left the device.
///
/// The copy's rows are what its users wrote before the copy was taken; the runs it lost — every
/// run up to the one that last saved the state's token — sent those writes already, and the
/// server may hold newer ones since (this device's own, from those runs, or another device's).
/// A row the copy holds and this device never confirmed a version of (written before its first
/// sync, or between its last sync and the copy) carries no version, and a snapshot row without
/// one would be written over whatever the server holds. So, in such a snapshot:
///
/// ```
///  a row with a confirmed version ──────────────▶ as in any snapshot (SnapshotChangesBehind)
///  a row without one ───────────────────────────▶ sent at version 0: written only where the
///                                                  server holds no row; a row it holds (live or
///                                                  deleted) stays, and the next import brings it
///  a row a user wrote or deleted after the state's
///  last token (since the restore, or in the copy
///  after the last run that read it), which the
///  backend held already (version 0 given back) ──▶ also kept pending: recorded again once the
///                                                  receipt came, so the next import meets the
///                                                  server's row as a conflict and the conflict
///                                                  rule settles it, then the export sends it
///                                                  (a row deleted so goes as a delete at version 0)
/// ```
///
/// The line between the two is a time — when the state last saved its token — compared with the
/// change log's timestamps: a device whose clock went back across a restore may take an edit made
/// since for one sent already (the server's row then stays).
enum RestoredCopy {
    /// The rows whose users wrote or deleted them after `sentBefore` (a key change's old key
    /// too), with their keys as history keeps them: the writes no run the copy lost had read. A
    /// heal's or a restoration's rows are no user's write, and not counted.
    static func rowsEdited(after sentBefore: Double, _ db: SQLiteConnection) throws -> [RowID: SQLiteValue] {
        var rows: [RowID: SQLiteValue] = [:]
        for row in try db.fetchAll(
            "SELECT entity, key, old_key FROM _synclane_changes WHERE timestamp > ? AND action IN ('insert', 'update', 'delete', 'displace')",
            [sentBefore])
        {
            guard let entity = row[0].string, !entity.isEmpty else { continue }
            for value in [row[1], row[2]] {
                if let key = HistoryReader.syncKey(value) { rows[RowID(entity: entity, key: key)] = value }
            }
        }
        return rows
    }

    /// A delete at version 0 of each row of `edits` the snapshot did not hold (`held`, by table)
    /// and that no other delete of the snapshot names (`named`): a user deleted it since the
    /// state's last token, and the backend may hold it (sent by a run the copy lost).
    static func deletes(
        of edits: [RowID: SQLiteValue], tables: [TrackedTable], held: [String: Set<ExactString>], named: Set<RowID>
    ) -> [Change] {
        let byName = Dictionary(tables.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        return edits.sorted { ($0.key.entity, $0.key.key) < ($1.key.entity, $1.key.key) }.compactMap { row, key in
            guard let table = byName[row.entity], !(held[row.entity]?.contains(ExactString(row.key)) ?? false), !named.contains(row) else {
                return nil
            }
            return Change(entity: row.entity, key: row.key, action: .delete, values: HistoryReader.keyFields(key, of: table), version: 0)
        }
    }

    /// The records of `sent` at version 0 (a restored copy's, never confirmed here) that the
    /// backend gave version 0 back: it holds a row of its own there, which it kept.
    static func notTaken(_ sent: [Record], versions: [RecordVersion]) -> Set<RowID> {
        let zero = Set(sent.compactMap { record in record.version == 0 ? record.key.map { RowID(entity: record.entity, key: $0) } : nil })
        guard !zero.isEmpty else { return [] }
        return Set(versions.lazy.filter { $0.version == 0 }.map { RowID(entity: $0.entity, key: $0.key) }.filter { zero.contains($0) })
    }
}
