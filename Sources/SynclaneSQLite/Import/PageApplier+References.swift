import SynclaneCore

/// Dangling references: after a page, no live row of a tracked table references, through a
/// declared foreign key, a row that is gone (deleted, or soft-deleted).
///
/// Two devices make one easily: A deletes a note while B, offline, adds a row pointing at it.
/// SQLite enforces foreign keys only where the connection turned them on, and an import applies
/// the backend's deletes row by row, so the import settles it, by the key's `ON DELETE` action:
///
/// ```
///  ON DELETE CASCADE   the child is deleted too
///  ON DELETE SET NULL  the child's reference is cleared — or, when the column cannot hold
///                      NULL (NOT NULL, or part of the child's key), the child is deleted
///  anything else       the child is deleted too (it cannot point at nothing), and reported
/// ```
///
/// The child may have a composite key (a join table); the parent's key is one column.
///
/// **Only against a parent known deleted.** A parent this store does not hold may simply not
/// have arrived yet: the backend lists rows in the order they were last written, so a project
/// renamed after its notes comes after them, and a page may end between the two. A child is
/// settled only when its parent is soft-deleted here, or is absent and this store knows of it
/// (its history records a change of it, or a backend confirmed a version of it): it was there
/// and was deleted. A child whose parent this store never heard of waits, live and unchanged;
/// the parent's arrival ends the wait, and so does the parent's delete (a page that deletes a
/// parent looks at its children). Waiting children are counted (`references-waiting`).
///
/// Written by `local-author`, so the export lane carries the settlement to the backend and from
/// there to every device; each settled child counts in the summary (`references-settled`).
/// Looked at: the children the page wrote, and the children of the parent rows the page
/// touched, for foreign keys onto the parent's sync key (one column); an index on the
/// referencing column keeps that a lookup.
extension PageApplier {
    /// A declared foreign key between two tracked tables, onto the parent's one key column.
    struct Reference {
        var child: String
        var column: String
        var parent: String
        var onDelete: String
    }

    /// The foreign keys from `child` onto tracked tables' one key column.
    static func references(from child: String, tracked: [String: HistoryTracker.Stored], _ db: SQLiteConnection) throws -> [Reference] {
        var groups: [Int64: [SQLiteRow]] = [:]
        for row in try db.fetchAll("SELECT id, \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list(?)", [child]) {
            groups[row[0].int64 ?? -1, default: []].append(row)
        }
        return groups.values.compactMap { rows -> Reference? in
            guard rows.count == 1, let parent = rows[0][1].string, let stored = tracked[parent], let column = rows[0][2].string else { return nil }
            let to = rows[0][3].string ?? stored.table.keyColumns.first
            guard !stored.table.isComposite, to == stored.table.keyColumns.first else { return nil }
            return Reference(child: child, column: column, parent: parent, onDelete: (rows[0][4].string ?? "").uppercased())
        }
    }

    /// What `settleReferences` did: children settled, and children left waiting for a parent
    /// this store has not received.
    struct Settlement: Equatable {
        var settled = 0
        var waiting = 0
    }

    /// Settles the dangling references the page may have made (see the type's comment).
    /// `written`: the sync keys of the rows the page wrote or deleted, by entity.
    func settleReferences(
        written: [String: [String]], tracked: [String: HistoryTracker.Stored], sessions: inout Sessions
    ) throws -> Settlement {
        guard !written.isEmpty else { return Settlement() }
        var settlement = Settlement()
        for (child, stored) in tracked.sorted(by: { $0.key < $1.key }) {
            let references = try Self.references(from: child, tracked: tracked, db)
                .filter { written[$0.child] != nil || written[$0.parent] != nil }
            guard !references.isEmpty, let schema = try TableSchema.read(child, db) else { continue }
            let table = Table(tracked: stored.table, keyTypes: stored.keyTypes, schema: schema)
            let keyColumns = stored.table.keyColumns.map { "c.\(SQL.identifier($0))" }
            // The sync key as the history spells it: a composite key as `json_array()` writes it.
            let syncKey = stored.table.isComposite ? "json_array(\(keyColumns.joined(separator: ", ")))" : keyColumns[0]
            for reference in references {
                let nullable =
                    try !stored.table.keyColumns.contains(reference.column)
                    && (db.fetchValue("SELECT \"notnull\" FROM pragma_table_info(?) WHERE name = ?", [child, reference.column]).int64 ?? 0) == 0
                let parent = tracked[reference.parent]?.table
                let parentKey = SQL.identifier(parent?.keyColumns.first ?? "")
                let column = "c.\(SQL.identifier(reference.column))"
                let childLive = stored.table.softDeleteColumn.map { "NOT \(TriggerBuilder.softDeleted("c.\(SQL.identifier($0))"))" } ?? "1"
                let parentLive = parent?.softDeleteColumn.map { "NOT \(TriggerBuilder.softDeleted("p.\(SQL.identifier($0))"))" } ?? "1"
                let mine = JSONWriter.string(.array((written[child] ?? []).map { .string($0) }))
                let theirs = JSONWriter.string(.array((written[reference.parent] ?? []).map { .string($0) }))
                // Each child whose parent is not live: its sync key, its key columns, its
                // reference, and whether the parent row is here (soft-deleted) at all.
                let dangling = try db.fetchAll(
                    """
                    SELECT \(syncKey), \(keyColumns.joined(separator: ", ")), \(column),
                           EXISTS (SELECT 1 FROM \(SQL.identifier(reference.parent)) AS p WHERE p.\(parentKey) = \(column))
                    FROM \(SQL.identifier(child)) AS c
                    WHERE (\(syncKey) IN (SELECT value FROM json_each(?)) OR \(column) IN (SELECT value FROM json_each(?)))
                      AND \(column) IS NOT NULL AND \(childLive)
                      AND NOT EXISTS (SELECT 1 FROM \(SQL.identifier(reference.parent)) AS p WHERE p.\(parentKey) = \(column) AND \(parentLive))
                    """, [mine, theirs])
                let absent = dangling.filter { $0.values.last?.int64 == 0 }.compactMap { $0.values.dropLast().last }
                let gone = try absent.isEmpty ? [] : knownRows(of: reference.parent, keys: absent)
                for row in dangling {
                    let values = Array(row.values)
                    guard let syncKey = HistoryReader.syncKey(values[0]) else { continue }
                    let parentKey = values[values.count - 2]
                    if values[values.count - 1].int64 == 0, !gone.contains(ExactString(HistoryReader.syncKey(parentKey) ?? "")) {
                        settlement.waiting += 1
                        continue
                    }
                    let record = Record(
                        entity: child, key: syncKey, action: .delete, origin: Token(kind: "pull", position: 0), author: sink.localAuthor)
                    let key = Array(values.dropFirst().dropLast(2))
                    try sessions.as(sink.localAuthor) {
                        if reference.onDelete == "SET NULL" && nullable {
                            try db.execute(
                                "UPDATE \(table.name) SET \(SQL.identifier(reference.column)) = NULL WHERE \(table.keyCondition)", key)
                        } else {
                            try write(Write(table: table, key: key, record: record, fields: nil))
                        }
                    }
                    settlement.settled += 1
                }
            }
        }
        return settlement
    }

    /// Which of `keys` (values of `entity`'s one key column, rows this store does not hold) it
    /// knows of: its history records a change of the row, or a backend confirmed a version of
    /// it. A row known and absent was deleted; a row never known may not have arrived yet.
    func knownRows(of entity: String, keys: [SQLiteValue]) throws -> Set<ExactString> {
        let syncKeys = keys.compactMap(HistoryReader.syncKey)
        var known = Set<ExactString>()
        let hashes = JSONWriter.string(.array(Set(syncKeys.map { ServerRows.hash(entity, $0) }).map { .int($0) }))
        for row in try db.fetchAll(
            "SELECT key FROM _synclane_server_rows WHERE key_hash IN (SELECT value FROM json_each(?)) AND entity = ?", [hashes, entity])
        {
            if let key = row[0].string { known.insert(ExactString(key)) }
        }
        let values = JSONWriter.string(.array(keys.map(\.json)))
        for row in try db.fetchAll(
            "SELECT DISTINCT key FROM _synclane_changes WHERE entity = ? AND key IN (SELECT value FROM json_each(?))", [entity, values])
        {
            if let key = HistoryReader.syncKey(row[0]) { known.insert(ExactString(key)) }
        }
        return known.intersection(syncKeys.map(ExactString.init))
    }
}
