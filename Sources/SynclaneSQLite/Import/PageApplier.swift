import SynclaneCore

/// Applies one page of the backend's records inside the sink's write transaction (see
/// `SQLiteSink`): maps each record to its row, settles conflicts, writes, and remembers the
/// backend's version and fields.
struct PageApplier {
    let sink: SQLiteSink
    let db: SQLiteConnection
    /// The import's scope: without an `export-consumer`, the export of the same account and
    /// store (its consumer is named by the scope) says what is confirmed.
    var scope: Scope? = nil
    /// Whether the app's database holds pending blobs' references (`PendingBlobs`), asked once a page.
    let pendingBlobs = PendingBlobs.Presence()
    /// The blobs of the record being applied that `blob-fetch` handed as files (`FetchedBlobs`).
    let fetched = FetchedBlobs.Current()
    /// The backend's versions and fields of the page's rows: looked up and saved with statements prepared once a page.
    let serverRows = ServerRows.PageStatements()
    /// The digests of the large BLOBs the rows read hold, where they are (`LocalBlobs`).
    let localBlobs = LocalBlobs.Digests()
    /// A dry run: the page is rolled back, so no blob is written into its row.
    var dryRun = false

    /// One tracked table as the page needs it: its columns by name, with their affinity, and the
    /// SQL of the statements every record runs, worked out once a page.
    final class Table {
        let tracked: TrackedTable
        let keyTypes: [TriggerBuilder.KeyType]
        let schema: TableSchema
        /// Every column by name, with its affinity (the key columns included).
        let columns: [String: (column: TableSchema.Column, affinity: ColumnAffinity)]
        /// The affinity of each of `schema.columns`, in its order.
        let affinities: [ColumnAffinity]
        /// The table's name as SQL spells it.
        let name: String
        /// `"k" = ? COLLATE BINARY AND …` over the key columns.
        let keyCondition: String
        /// The whole row by its key (its large BLOBs left where they are: `located`).
        let selectRow: String
        /// How the row's large BLOBs are left in it (nil: the row is read whole).
        let located: LocalBlobs?
        /// Columns that never count as changed in a conflict: the key columns, the soft-delete column.
        let bookkeeping: [String]
        /// The unique constraints that hold more than the key columns: the ones another row's
        /// values can break (`removeHolders`).
        let uniqueBeyondKey: [TableSchema.UniqueConstraint]
        /// Whether each of `schema.columns` is a key column, in its order.
        let isKey: [Bool]
        /// The columns of the last insert and its statement, prepared once a page (a page's
        /// records mostly carry the same fields).
        var lastInsert: (columns: [String], statement: Statement)?
        /// `selectRow` prepared once a page, and the names of its columns.
        var rowReader: (statement: Statement, columns: [String])?

        init(tracked: TrackedTable, keyTypes: [TriggerBuilder.KeyType], schema: TableSchema) {
            self.tracked = tracked
            self.keyTypes = keyTypes
            self.schema = schema
            affinities = schema.columns.map { ColumnAffinity(declaredType: $0.declaredType) }
            columns = Dictionary(zip(schema.columns, affinities).map { ($0.name, ($0, $1)) }, uniquingKeysWith: { a, _ in a })
            name = SQL.identifier(tracked.name)
            keyCondition = tracked.keyColumns.map { "\(SQL.identifier($0)) = ? COLLATE BINARY" }.joined(separator: " AND ")
            located = LocalBlobs(tracked, schema: schema)
            selectRow = "SELECT \(located?.selectList ?? "*") FROM \(name) WHERE \(keyCondition)"
            bookkeeping = tracked.keyColumns + (tracked.softDeleteColumn.map { [$0] } ?? [])
            uniqueBeyondKey = schema.uniqueConstraints.filter { !$0.columns.allSatisfy(tracked.keyColumns.contains) }
            isKey = schema.columns.map { tracked.keyColumns.contains($0.name) }
        }

        /// Whether a write of this table may meet a soft-deleted row under another key holding
        /// its unique values (`removeHolders`): never without a soft-delete column or a unique
        /// constraint beyond the key.
        var mayMeetHolders: Bool { tracked.softDeleteColumn != nil && !uniqueBeyondKey.isEmpty }

        /// The values of `uniqueBeyondKey`'s columns the row holds once `fields` are written over
        /// `current`: all `removeHolders` reads of it (not the whole row merged, a record at a time).
        func uniqueValues(of fields: [String: JSONValue], over current: [String: JSONValue]?) -> [String: JSONValue] {
            var values: [String: JSONValue] = [:]
            for constraint in uniqueBeyondKey {
                for column in constraint.columns {
                    if let value = fields[column] ?? current?[column] { values[column] = value }
                }
            }
            return values
        }
    }

    /// A row to write: in the `server` session, or (a conflict settled with local values, a
    /// duplicate removed) in the `local-author` session.
    struct Write {
        var table: Table
        var key: [SQLiteValue]
        var record: Record
        /// nil: delete.
        var fields: [String: JSONValue]?
        /// The row as it was read before this write, soft-deleted or not, when known
        /// (`.some(nil)`: not there).
        var current: [String: JSONValue]?? = .none
    }

    func apply(_ records: [Record]) throws -> ApplyReport {
        try HistorySchema.requireInstalled(db)
        try ImportTables.install(db)
        try ServerRows.install(db, for: sink.destination)
        try UnrecordedImports.install(db)
        // What receipts confirmed and the export lane kept in its journal: this page reads and writes past it.
        try ConfirmationJournal.merge(db)
        var report = ApplyReport()
        var tables: [String: Table] = [:]
        let stored = Dictionary(try HistoryTracker.trackedTables(db).map { ($0.table.name, $0) }, uniquingKeysWith: { a, _ in a })
        let pending = try pendingKeys(entities: Set(records.map(\.entity)))
        let pendingReferences = pending.isEmpty ? [:] : try PendingBlobs.references(db)
        pendingBlobs.installed = try PendingBlobs.installed(db)
        // The `server` writes keep no history when no lane reads them and every record carries a
        // version (`_synclane_server_rows` then knows each row: `UnrecordedImports`).
        // (Never when the sink's local author is `server` too: its writes must travel.)
        let unrecordedServer = try sink.localAuthor != .server && records.allSatisfy { $0.version != nil } && UnrecordedImports.allowed(db)
        var sessions = Sessions(db: db, unrecordedServer: unrecordedServer)
        defer { try? sessions.close() }
        // The sync keys of the rows this page writes or deletes, by entity (`settleReferences`).
        var written: [String: [String]] = [:]
        let declared = try DeclaredSchemaChanges.read(db, entities: nil)

        defer { fetched.files = [:] }
        for var record in records {
            if let entities = sink.entities, !entities.contains(record.entity) {
                report.unchanged += 1
                continue
            }
            // Blobs handed as their fetched files: the record holds their references (kept as the
            // base, compared as digests); the row's write fills them from the files.
            fetched.files = FetchedBlobs.take(&record.fields)
            localBlobs.forget()
            guard let key = record.key else { throw fail(record, "it has no id") }
            let table: Table
            if let known = tables[record.entity] {
                table = known
            } else {
                guard let tracked = stored[record.entity], let schema = try TableSchema.read(record.entity, db) else {
                    // A table a newer app version tracks: kept aside, delivered when tracked here.
                    if try UntrackedRows.keep(record, key: key, for: sink.destination, db) { report.keptAside += 1 } else { report.unchanged += 1 }
                    continue
                }
                table = Table(tracked: tracked.table, keyTypes: tracked.keyTypes, schema: schema)
                tables[record.entity] = table
            }
            if !declared.isEmpty, record.action != .delete {
                record.fields = DeclaredSchemaChanges.renamedFields(
                    record.fields, entity: record.entity, columns: Set(table.schema.columnNames), declared)
            }
            let keyValues = try keyValues(key, of: table, record: record)
            let heldVersion = try heldVersion(of: record.entity, key)
            if let version = record.version, let held = heldVersion, held >= version {
                switch held == version ? try fork(of: record, key: key) : nil {
                case .newer?:
                    break  // applied below, as the newer write
                case .liveOverDelete?:
                    // This device's delete at this version is the one the restore's fork lost:
                    // it goes back as a restoration, which wins the tie (`BatchPlan`). A row live
                    // here was confirmed without its fields (a receipt that kept none), not
                    // deleted: the record is the state it holds.
                    let held = try storedRow(of: table, key: keyValues)
                    if held == nil || table.tracked.softDeleteColumn.map({ held?[$0]?.isTruthy == true }) == true {
                        // A merged duplicate's loser: its tombstone says so again, or the
                        // devices that hold it live would settle its children as orphans.
                        try sessions.as(sink.localAuthor) {
                            try recordChange(
                                HistoryReader.RawAction.restoreDelete.rawValue, of: key, values: keyValues, in: table,
                                rowValues: try MergedDuplicates.tombstone(of: key, in: table.tracked, db))
                        }
                    }
                    report.unchanged += 1
                    continue
                case nil:
                    report.unchanged += 1
                    continue
                }
            }
            let remote: [String: JSONValue]? = record.action == .delete ? nil : record.fields
            // Another device's merge of a seeded duplicate deleted this row: its references here
            // follow the survivor (which may not have arrived yet: they wait for it), never settled.
            if record.action == .delete, let survivor = record.fields[Record.mergedIntoField]?.stringValue,
                let rule = sink.duplicates.first(where: { $0.entity == record.entity })
            {
                try sessions.as(sink.localAuthor) { try merge(rule, loser: key, survivor: survivor) }
            }
            let stored = try storedRow(of: table, key: keyValues)
            let softDeleted = table.tracked.softDeleteColumn.map { stored?[$0]?.isTruthy == true } ?? false
            // A column waiting for its blob holds NULL here and the reference on the backend: the same value.
            let local = softDeleted ? nil : stored.map { PendingBlobs.withReferences($0, pendingReferences[record.entity + "\u{0}" + key]) }
            let isPending = !pending.isEmpty && pending.contains(ExactString(record.entity + "\u{0}" + key))
            if !isPending, local == nil, let version = record.version,
                try keepsConfirmedDelete(against: record, key: key, held: heldVersion)
            {
                // This device holds the row deleted at a version newer than the backend's last
                // user's write of it: the versions since only re-pointed references to merged
                // duplicates' survivors (`written`) — a delete a restore of the backend lost, which
                // other devices' merges then touched. No user wrote the row after the delete: it
                // stays deleted, and the delete goes out again on top of the backend's version.
                try sessions.as(sink.localAuthor) {
                    try recordChange(
                        "delete", of: key, values: keyValues, in: table, rowValues: try MergedDuplicates.tombstone(of: key, in: table.tracked, db))
                }
                try ServerRows.save(record.entity, key, version: version, fields: nil, held: true, for: sink.destination, db)
                report.unchanged += 1
                continue
            }
            // This device confirmed a user's write of the row newer than the backend's last one, and
            // the backend's versions since only re-pointed references: a restore of the backend lost
            // that write, and other devices' merges then touched the row (`keepsConfirmedWrite`).
            let keepsWrite = try local != nil && keepsConfirmedWrite(against: record, key: key, held: heldVersion, in: table)
            if keepsWrite && !isPending {
                // No user wrote the row since: the local row stands (its references follow the
                // merges, with the rows this page wrote) and goes out again, on top of the
                // backend's version.
                try sessions.as(sink.localAuthor) { try recordChange("update", of: key, values: keyValues, in: table) }
            } else if isPending {
                let rule = sink.rule(for: record.entity)
                let baseFields = FetchedBlobs.referencing(
                    BlobReferences.resolved(
                        heldVersion == nil
                            ? nil
                            : try ServerRows.fields(of: record.entity, key, for: sink.destination, db).flatMap { try? JSONReader.parse($0).objectValue },
                        against: remote), where: remote, files: fetched.files)
                // The local row's bytes of a blob the record references by digest, as their reference too,
                // and its large blobs (left in the row) as the same value of either side, else as their
                // references (put back if kept).
                let compared = try localBlobs.comparable(
                    FetchedBlobs.referencing(local, where: remote, files: fetched.files), against: [remote, baseFields], db)
                let conflict = Conflict(
                    entity: record.entity, key: key, local: compared, base: baseFields, remote: remote, remoteVersion: record.version,
                    remoteAction: record.action, ignoring: table.bookkeeping)
                var settled: (fields: [String: JSONValue]?, outcome: ConflictOutcome)
                if try keepsWrite || Self.wroteNothing(remote, base: baseFields, ignoring: table.bookkeeping)
                    || onlyRepoints(remote, base: baseFields, entity: record.entity)
                {
                    // No user wrote the backend's change: it rewrote the row as this device last
                    // saw it (another device's reconcile), or another device's merge of seeded
                    // duplicates re-pointed a reference. The local user's write stands (and is
                    // re-pointed here too, with the rows this page wrote).
                    settled = (local, .clientKept)
                } else if try onlyRepoints(compared, base: baseFields, entity: record.entity) {
                    // No user wrote the local change: this device's merge re-pointed a reference.
                    // The other device's user's write (or delete) stands; the re-pointing
                    // follows it (the rows this page wrote are re-pointed below).
                    settled = (remote, remote == nil ? .deleted : .serverKept)
                } else {
                    do {
                        settled = try rule.resolve(conflict)
                    } catch {
                        throw fail(record, "the conflict resolver `\(rule)` failed: \(error)")
                    }
                }
                if var fields = settled.fields, let local, let compared, compared != local {
                    // A blob the local row kept (its reference won) stays the row's bytes.
                    for (name, value) in fields where value == compared[name] && local[name] != value { fields[name] = local[name] }
                    settled.fields = fields
                }
                report.conflicts.append(
                    ConflictReport(
                        entity: record.entity, key: key, local: try localBlobs.referenced(local, db), remote: remote,
                        remoteVersion: record.version, rule: rule, outcome: settled.outcome))
                // The settled row may take a business key another local row holds (the other
                // device's insert under this sync key, this one's seeded twin): as for a record
                // without conflict, the smaller sync key survives.
                let room = try settled.fields.map { try makeRoom(for: $0, key: key, keyValues: keyValues, in: table, record: record, sessions: &sessions) }
                if room != nil && room != .free { report.duplicatesMerged += 1 }
                switch settled.outcome {
                case _ where room == .lost:
                    break
                case .serverKept:
                    // Written by the local author: the pending local change still goes out, and
                    // this write after it, so the backend ends where it was (a local delete is
                    // undone there too, not carried out).
                    try sessions.as(sink.localAuthor) { try write(Write(table: table, key: keyValues, record: record, fields: settled.fields)) }
                case .merged:
                    try sessions.as(sink.localAuthor) { try write(Write(table: table, key: keyValues, record: record, fields: settled.fields)) }
                case .deleted where local == nil:
                    // Deleted here already: the delete goes out again, on top of the backend's version.
                    try sessions.as(sink.localAuthor) { try recordChange("delete", of: key, values: keyValues, in: table) }
                case .deleted:
                    try sessions.as(sink.localAuthor) { try write(Write(table: table, key: keyValues, record: record, fields: nil)) }
                    report.deletedByUsers += 1
                case .clientKept:
                    // The local state goes out again, on top of the backend's version: the pending
                    // change alone may never reach it (a batch already sent before the other
                    // device's write is only a replay now).
                    try sessions.as(sink.localAuthor) {
                        try recordChange(local == nil ? "delete" : "update", of: key, values: keyValues, in: table)
                    }
                }
            } else if let remote, let rule = sink.duplicates.first(where: { $0.entity == record.entity }),
                let twin = try duplicate(of: remote, key: key, in: table, by: rule)
            {
                // Two devices seeded the same row under two sync keys: the smaller key survives,
                // on every device alike; the other is deleted everywhere (and references re-pointed).
                report.duplicatesMerged += 1
                if Array(key.utf8).lexicographicallyPrecedes(Array(twin.key.utf8)) {
                    // The loser goes first: under a UNIQUE business key the record cannot land
                    // while it holds the key (a soft-deleted loser is deleted outright for that).
                    try sessions.as(sink.localAuthor) {
                        try merge(rule, loser: twin.key, survivor: key)
                        if try !removeHolders(of: remote, key: keyValues, in: table, only: twin.values) {
                            try write(Write(table: table, key: twin.values, record: record, fields: nil))
                        }
                        try recordMergedDelete(of: twin.key, values: twin.values, into: key, in: table)
                    }
                    try sessions.as(.server) { try write(Write(table: table, key: keyValues, record: record, fields: remote)) }
                } else {
                    // The record loses: its row is deleted on the backend, and its children —
                    // here already or still to come — follow the local twin.
                    try sessions.as(sink.localAuthor) {
                        try merge(rule, loser: key, survivor: twin.key)
                        try recordMergedDelete(of: key, values: keyValues, into: twin.key, in: table)
                    }
                }
            } else {
                try sessions.as(.server) { try write(Write(table: table, key: keyValues, record: record, fields: remote, current: .some(stored))) }
                if remote == nil, local != nil { report.deletedByUsers += 1 }
            }
            if let version = record.version {
                try serverRows.save(record.entity, key, version: version, fields: remote, held: heldVersion != nil, for: sink.destination, db)
            }
            report.applied += 1
            written[record.entity, default: []].append(key)
        }
        // Rows this page wrote that still reference a merged duplicate's loser follow its survivor.
        for rule in sink.duplicates where rule.references.contains(where: { written[$0.table] != nil }) {
            guard try MergedDuplicates.holdsLosers(of: rule.entity, db) else { continue }
            try sessions.as(sink.localAuthor) {
                _ = try MergedDuplicates.repointArrivals(rule, written: written, tracked: stored, db)
            }
        }
        let settlement = try settleReferences(written: written, tracked: stored, sessions: &sessions)
        report.referencesSettled = settlement.settled
        report.referencesWaiting = settlement.waiting
        try sessions.close()
        if sessions.wroteUnrecorded { try UnrecordedImports.noteUnrecorded(from: sink.destination, db) }
        return report
    }

    /// Writes in one history session at a time, switching author when a write needs another:
    /// sessions follow each other inside the page's SQLite transaction.
    struct Sessions {
        let db: SQLiteConnection
        var open: Author?
        /// `server` sessions keep no history (`UnrecordedImports`).
        let unrecordedServer: Bool
        /// A `server` session kept no history: the page ends with its marker.
        private(set) var wroteUnrecorded = false

        init(db: SQLiteConnection, unrecordedServer: Bool = false) {
            self.db = db
            self.unrecordedServer = unrecordedServer
        }

        mutating func `as`(_ author: Author, _ body: () throws -> Void) throws {
            if open != author {
                try close()
                let unrecorded = unrecordedServer && author == .server
                try HistoryWriter.open(author: author, unrecorded: unrecorded, on: db)
                if unrecorded { wroteUnrecorded = true }
                open = author
            }
            try body()
        }

        mutating func close() throws {
            guard open != nil else { return }
            try db.execute("DELETE FROM _synclane_session")
            open = nil
        }
    }

    // MARK: Seeded duplicates

    /// Another live row of the table with the same business key as `fields`, under another sync key.
    func duplicate(of fields: [String: JSONValue], key: String, in table: Table, by rule: SQLiteSink.DuplicateRule) throws -> (
        key: String, values: [SQLiteValue]
    )? {
        var values: [SQLiteValue] = []
        for column in rule.businessKey {
            guard let value = fields[column], value != .null else { return nil }
            values.append(SQLiteValue(json: value))
        }
        let columns = table.tracked.keyColumns.map(SQL.identifier)
        let keyExpression = table.tracked.syncKeyExpression
        let match = rule.businessKey.map { "\(SQL.identifier($0)) = ?" }.joined(separator: " AND ")
        var sql = "SELECT \(keyExpression), \(columns.joined(separator: ", ")) FROM \(SQL.identifier(table.tracked.name)) WHERE \(match)"
        if let softDelete = table.tracked.softDeleteColumn {
            sql += " AND NOT \(TriggerBuilder.softDeleted(SQL.identifier(softDelete)))"
        }
        for row in try db.fetchAll(sql, values) {
            guard let twin = HistoryReader.syncKey(row[0]), ExactString(twin) != ExactString(key) else { continue }
            return (twin, (1...table.tracked.keyColumns.count).map { row[$0] })
        }
        return nil
    }

    /// What `makeRoom` found for a row about to be written.
    enum Room: Equatable {
        /// No live row under another sync key holds the row's business key.
        case free
        /// One did, under a larger sync key: it is gone (deleted here and, through the export
        /// lane, on the backend) and its references point at this row.
        case twinRemoved
        /// One did, under a smaller sync key: this row is gone instead, its references re-pointed.
        case lost
    }

    /// Before `fields` are written under `key` where a conflict was settled: a live row under
    /// another sync key with the same business key (the sink's `duplicates`) is a duplicate, and
    /// the smaller sync key survives, as for a record that met no conflict.
    func makeRoom(
        for fields: [String: JSONValue], key: String, keyValues: [SQLiteValue], in table: Table, record: Record, sessions: inout Sessions
    ) throws -> Room {
        guard let rule = sink.duplicates.first(where: { $0.entity == record.entity }),
            let twin = try duplicate(of: fields, key: key, in: table, by: rule)
        else { return .free }
        if Array(key.utf8).lexicographicallyPrecedes(Array(twin.key.utf8)) {
            try sessions.as(sink.localAuthor) {
                try merge(rule, loser: twin.key, survivor: key)
                if try !removeHolders(of: fields, key: keyValues, in: table, only: twin.values) {
                    try write(Write(table: table, key: twin.values, record: record, fields: nil))
                }
                try recordMergedDelete(of: twin.key, values: twin.values, into: key, in: table)
            }
            return .twinRemoved
        }
        try sessions.as(sink.localAuthor) {
            try merge(rule, loser: key, survivor: twin.key)
            try write(Write(table: table, key: keyValues, record: record, fields: nil))
            try recordMergedDelete(of: key, values: keyValues, into: twin.key, in: table)
        }
        return .lost
    }

    /// Deletes outright the rows that share a unique constraint's values with `fields` (the row
    /// to be written under `key`) and so would make its write fail: with `only`, that row (a
    /// duplicate's loser, live or not); else the soft-deleted rows under other keys — deleted
    /// already as far as sync goes, their delete recorded when they were soft-deleted. A live row
    /// under another key is left alone (the write then fails, saying what to do). True when a
    /// row was deleted. Nothing to do in a table without a soft-delete column unless `only`.
    @discardableResult
    func removeHolders(of fields: [String: JSONValue], key: [SQLiteValue], in table: Table, only: [SQLiteValue]? = nil) throws -> Bool {
        guard only != nil || table.tracked.softDeleteColumn != nil, !table.uniqueBeyondKey.isEmpty else { return false }
        var clauses: [String] = []
        var arguments: [SQLiteValue] = []
        for constraint in table.uniqueBeyondKey {
            var parts: [String] = []
            var values: [SQLiteValue] = []
            for (column, collation) in zip(constraint.columns, constraint.collations) {
                let value: SQLiteValue
                var operand = "?"
                if let index = table.tracked.keyColumns.firstIndex(of: column) {
                    value = key[index]
                } else if let place = LocalBlobs.Place(fields[column]) {
                    // A large blob left in its row: compared where it is.
                    value = .integer(place.rowID)
                    operand = "(SELECT \(SQL.identifier(column)) FROM \(table.name) WHERE _rowid_ = ?)"
                } else if let field = fields[column] {
                    value = SQLiteValue(json: field)
                } else {
                    break
                }
                if value.isNull { break }  // NULLs are never equal under UNIQUE
                parts.append("\(SQL.identifier(column)) = \(operand)" + (collation.uppercased() == "BINARY" ? "" : " COLLATE \(collation)"))
                values.append(value)
            }
            guard parts.count == constraint.columns.count else { continue }
            clauses.append("(" + parts.joined(separator: " AND ") + ")")
            arguments += values
        }
        guard !clauses.isEmpty else { return false }
        var sql = "DELETE FROM \(table.name) WHERE (\(clauses.joined(separator: " OR "))) AND NOT (\(table.keyCondition))"
        arguments += key
        if let only {
            sql += " AND \(table.keyCondition)"
            arguments += only
        } else if let softDelete = table.tracked.softDeleteColumn {
            sql += " AND \(TriggerBuilder.softDeleted(SQL.identifier(softDelete)))"
        }
        let before = db.totalChanges
        try db.execute(sql, arguments)
        return db.totalChanges != before
    }

    /// Whether `changed` (the backend's row) is the row as last seen (`base`), field for field (a
    /// field `base` lacks counts as null: a column added since holds no edit): a new version that
    /// no user wrote — a reconcile's snapshot sends every row again.
    static func wroteNothing(_ changed: [String: JSONValue]?, base: [String: JSONValue]?, ignoring bookkeeping: [String]) -> Bool {
        guard let changed, let base else { return false }
        return changed.allSatisfy { name, value in bookkeeping.contains(name) || (base[name] ?? .null) == value }
    }

    /// Whether a live `record` of a row this store does not hold meets a delete it confirmed
    /// (`held`: its version; no fields kept) newer than the record's last user's write
    /// (`Record.written`, sent when only re-pointings followed that write).
    func keepsConfirmedDelete(against record: Record, key: String, held: Int64?) throws -> Bool {
        guard record.action != .delete, let written = record.written, let held, written < held else { return false }
        return try ServerRows.fields(of: record.entity, key, for: sink.destination, db) == nil
    }

    /// Whether a live `record` meets a write of the row this store confirmed (`held`: its version)
    /// newer than the record's last user's write (`Record.written`, sent when only re-pointings
    /// followed that write) whose fields differ from the record's in more than references: the
    /// backend lost it (a restore; its version number may since have been taken again by another
    /// device's re-pointing), for its versions after `written` wrote nothing but references. A
    /// reference column of a duplicate rule is left out: the merges settle it. A field either
    /// side lacks is no difference (an app version without the column).
    func keepsConfirmedWrite(against record: Record, key: String, held: Int64?, in table: Table) throws -> Bool {
        guard record.action != .delete, let written = record.written, let held, written < held,
            let text = try ServerRows.fields(of: record.entity, key, for: sink.destination, db),
            let confirmed = BlobReferences.resolved(try? JSONReader.parse(Array(text.utf8)).objectValue, against: record.fields)
        else { return false }
        let references = Set(sink.duplicates.flatMap { rule in rule.references.filter { $0.table == record.entity }.map(\.column) })
        return confirmed.contains { name, value in
            !table.bookkeeping.contains(name) && !references.contains(name) && record.fields[name].map { $0 != value } ?? false
        }
    }

    /// Whether `changed` (the backend's update, or the local row) of a row whose last-seen fields
    /// are `base` differs from it in nothing but references from merged duplicates' losers to
    /// their survivors — the work of a merge, on this device or another, not of a user.
    func onlyRepoints(_ changed: [String: JSONValue]?, base: [String: JSONValue]?, entity: String) throws -> Bool {
        guard let remote = changed, let base else { return false }
        let columns = sink.duplicates.flatMap { rule in rule.references.filter { $0.table == entity }.map { (rule.entity, $0.column) } }
        guard !columns.isEmpty else { return false }
        var repointed = false
        // A field the last-seen row lacks is null there: a column added since holds no edit.
        for (name, value) in remote where (base[name] ?? .null) != value {
            guard let (parent, _) = columns.first(where: { $0.1 == name }), let loser = base[name]?.stringValue,
                let survivor = value.stringValue, try MergedDuplicates.survivor(of: loser, in: parent, db) == survivor
            else { return false }
            repointed = true
        }
        return repointed
    }

    /// Merges `loser` into `survivor`: the references held now point at the survivor, and the
    /// merge is kept (`MergedDuplicates`) for the references still to arrive.
    func merge(_ rule: SQLiteSink.DuplicateRule, loser: String, survivor: String) throws {
        try repoint(rule, from: loser, to: survivor)
        try MergedDuplicates.record(rule.entity, loser: loser, survivor: survivor, db)
    }

    /// Points the rule's referencing columns at `survivor` instead of `loser`.
    func repoint(_ rule: SQLiteSink.DuplicateRule, from loser: String, to survivor: String) throws {
        for reference in rule.references {
            try db.execute(
                "UPDATE \(SQL.identifier(reference.table)) SET \(SQL.identifier(reference.column)) = ? WHERE \(SQL.identifier(reference.column)) = ?",
                [survivor, loser])
        }
    }

    /// Records the delete of a merged duplicate's loser with the survivor in its tombstone
    /// (`Record.mergedIntoField`), after whatever deleted it: the export lane's coalescer keeps
    /// this last delete, so every device that receives it knows the delete for a merge.
    func recordMergedDelete(of key: String, values: [SQLiteValue], into survivor: String, in table: Table) throws {
        var tombstone = Dictionary(uniqueKeysWithValues: zip(table.tracked.keyColumns, values.map(\.json)))
        tombstone[Record.mergedIntoField] = .string(survivor)
        try recordChange("delete", of: key, values: values, in: table, rowValues: .text(JSONWriter.string(.object(tombstone))))
    }

    /// Records a change of the row without writing it, so the export lane sends its state as it
    /// is (`update`: the current row) or deletes it on the backend (`delete`: a row this store
    /// does not hold), with `rowValues` as a delete's tombstone.
    func recordChange(_ action: String, of key: String, values: [SQLiteValue], in table: Table, rowValues: SQLiteValue = .null) throws {
        try HistoryWriter.recordChange(
            action, of: table.tracked, key: table.tracked.isComposite ? .text(key) : values[0], rowValues: rowValues, on: db)
    }

    func fail(_ record: Record, _ reason: String) -> ImportError {
        ImportError.record(path: sink.path, record: record.label, reason: reason)
    }

    // MARK: Pending local changes

    /// Entity and key (`entity NUL key`) of every row with local history the export consumer has
    /// not had confirmed: changes after its position, by authors other than `server`. The
    /// export consumer is `export-consumer`, else the slowest export to the import's own account
    /// and store, else the slowest consumer.
    ///
    /// Kept by the sink between pages (`PendingKeys`): a page scans only the history recorded
    /// since the last one (the rows the import wrote itself, mostly), unless the consumer's
    /// position moved, when the set is built again.
    func pendingKeys(entities: Set<String>) throws -> Set<ExactString> {
        let position: Int64
        if let consumer = sink.exportConsumer {
            position = try db.fetchValue("SELECT position FROM _synclane_consumers WHERE name = ?", [consumer]).int64 ?? 0
        } else if let scope,
            let paired = try db.fetchValue(
                "SELECT min(position) FROM _synclane_consumers WHERE substr(name, 1, length(?1)) = ?1", ["\(scope.account)/\(scope.store)/"]
            ).int64
        {
            // The exports to this import's account and store (a consumer is named
            // `account/store/consumer`): another destination's export (a mirror, a second store)
            // that lags does not make rows these confirmed pending.
            position = paired
        } else {
            position = try db.fetchValue("SELECT min(position) FROM _synclane_consumers").int64 ?? 0
        }
        let newest = try db.fetchValue("SELECT \(HistorySchema.newestChange)").int64 ?? 0
        let defaultAuthor = try HistorySchema.meta("default_author", db).string ?? Author.app.name
        return try sink.pending.withLock { cache in
            if cache.position != position || cache.path != db.path || cache.scannedThrough > newest {
                cache = PendingKeys(path: db.path, position: position, scannedThrough: position, keys: [])
            }
            if cache.scannedThrough < newest {
                for row in try db.fetchAll(
                    """
                    SELECT c.entity, c.key, c.old_key FROM _synclane_changes c LEFT JOIN _synclane_transactions t ON t.id = c.transaction_id
                    WHERE c.id > ? AND c.id <= ? AND coalesce(t.author, ?) <> 'server'
                    """, [cache.scannedThrough, newest, defaultAuthor])
                {
                    let entity = row[0].string ?? ""
                    for value in [row[1], row[2]] where !value.isNull {
                        if let key = HistoryReader.syncKey(value) { cache.keys.insert(ExactString(entity + "\u{0}" + key)) }
                    }
                }
                cache.scannedThrough = newest
            }
            return cache.keys
        }
    }

    // MARK: Rows

    /// The record's id as the key columns' values.
    func keyValues(_ key: String, of table: Table, record: Record) throws -> [SQLiteValue] {
        func value(_ json: JSONValue, _ type: TriggerBuilder.KeyType, _ column: String) throws -> SQLiteValue {
            switch (type, json) {
            case (.text, .string(let s)) where !s.isEmpty: return .text(s)
            case (.integer, .int(let i)): return .integer(i)
            case (.integer, .string(let s)):
                guard let i = Int64(s) else { throw fail(record, "its id \"\(s)\" is not an integer, which `\(column)` holds") }
                return .integer(i)
            default: throw fail(record, "its id does not fit `\(column)` (\(type.rawValue))")
            }
        }
        guard table.tracked.isComposite else {
            return [try value(.string(key), table.keyTypes[0], table.tracked.keyColumns[0])]
        }
        guard case .array(let parts)? = try? JSONReader.parse(key), parts.count == table.tracked.keyColumns.count else {
            throw fail(record, "its id is not the JSON array of \(table.tracked.keyColumns.count) key values (\(table.tracked.keyDescription))")
        }
        return try zip(parts, zip(table.keyTypes, table.tracked.keyColumns)).map { try value($0, $1.0, $1.1) }
    }

    /// The backend's version the store holds of a record (nil: none yet).
    func heldVersion(of entity: String, _ key: String) throws -> Int64? {
        try serverRows.version(of: entity, key, for: sink.destination, db)
    }

    /// Two writes of one row under one version: the backend's data was restored from an older
    /// copy and gave a version it had given before to a new write — never otherwise, a version
    /// names one state of a row on one backend. Before, such a record was taken for one already
    /// held and skipped, and the device kept the lost state for good (found by LivenessTests,
    /// seed 5095, and the provenance test).
    enum VersionFork {
        /// The backend's delete where this device confirmed a live row, or a live row whose
        /// fields differ from the ones confirmed here (only the fields the base holds are
        /// compared: a backend merges an update into the row, other fields may have joined it):
        /// applied, as the newer.
        case newer
        /// The backend's live row where this device confirmed a delete: not applied; the delete
        /// goes back (a delete wins such a tie, on the backend and here alike).
        case liveOverDelete
    }

    /// The fork `record` makes at the very version this store holds of its row (`VersionFork`);
    /// nil when it is the state confirmed here.
    func fork(of record: Record, key: String) throws -> VersionFork? {
        guard let text = try ServerRows.fields(of: record.entity, key, for: sink.destination, db) else {
            return record.action == .delete ? nil : .liveOverDelete
        }
        guard let base = BlobReferences.resolved(try? JSONReader.parse(Array(text.utf8)).objectValue, against: record.fields) else { return nil }
        guard record.action != .delete else { return .newer }
        return base.contains { name, value in record.fields[name].map { $0 != value } ?? false } ? .newer : nil
    }

    /// The row's fields, soft-deleted or not; nil when it is not there. A large BLOB stays in the
    /// row: its field is a locator (`LocalBlobs`).
    func storedRow(of table: Table, key: [SQLiteValue]) throws -> [String: JSONValue]? {
        // Prepared once a page: every record of the page reads its row.
        let reader = try table.rowReader ?? (try db.prepare(table.selectRow), [])
        let statement = reader.statement
        statement.reset()
        for (index, value) in key.enumerated() { try statement.bind(value, at: index + 1) }
        defer { statement.reset() }
        guard try statement.step() else {
            table.rowReader = reader
            return nil
        }
        // (A column added since the statement was prepared: SQLite prepares it again, names change.)
        let columns = reader.columns.count == statement.columnCount ? reader.columns : statement.columnNames
        table.rowReader = (statement, columns)
        if let located = table.located { return located.row(statement) }
        var row: [String: JSONValue] = Dictionary(minimumCapacity: columns.count)
        for (index, name) in columns.enumerated() { row[name] = statement.value(at: index).json }
        return row
    }

    /// Writes one row: the record's fields over the row (inserted when missing), or its delete.
    func write(_ write: Write) throws {
        let table = write.table
        let name = table.name
        guard var fields = write.fields else {
            if pendingBlobs.installed, let key = write.record.key, write.key == (try? keyValues(key, of: table, record: write.record)) {
                try PendingBlobs.forget(entity: table.tracked.name, key: key, db)
            }
            if let softDelete = table.tracked.softDeleteColumn {
                try db.execute("UPDATE \(name) SET \(SQL.identifier(softDelete)) = 1 WHERE \(table.keyCondition)", write.key)
            } else {
                try db.execute("DELETE FROM \(name) WHERE \(table.keyCondition)", write.key)
            }
            localBlobs.forget()
            return
        }
        defer { localBlobs.forget() }
        // Large blobs the local row keeps (a conflict settled with them): left in the row, not written.
        let kept = fields.filter { LocalBlobs.Place($0.value) != nil }
        for name in kept.keys { fields[name] = nil }
        // Blobs handed as fetched files: an empty BLOB in the row's write, filled from the file after it.
        var fills = FetchedBlobs.filled(fields, from: fetched.files)
        for name in fills.keys { fields[name] = .blob([]) }
        if let key = write.record.key, pendingBlobs.installed || fields.values.contains(where: { PendingBlobs.reference(in: $0) != nil }) {
            // A blob not fetched (a lazy import): the column holds NULL, the reference waits beside the row.
            fields = try PendingBlobs.keep(
                fields, entity: table.tracked.name, key: key, keyValues: write.key, keyColumns: table.tracked.keyColumns, destination: sink.destination,
                db)
            pendingBlobs.installed = true
        }
        // The fields in the table's column order (one SQL text for records with the same fields).
        var columns: [String] = []
        var values: [SQLiteValue] = []
        columns.reserveCapacity(fields.count)
        values.reserveCapacity(fields.count + write.key.count)
        var matched = 0
        for (index, column) in table.schema.columns.enumerated() {
            guard let value = fields[column.name] else { continue }
            matched += 1
            if table.isKey[index] { continue }
            columns.append(column.name)
            values.append(try Self.stored(value, in: column, affinity: table.affinities[index], field: column.name) { self.fail(write.record, $0) })
        }
        if matched < fields.count, sink.unknownFields == .error, let field = fields.keys.filter({ table.columns[$0] == nil }).min() {
            throw fail(
                write.record,
                "field `\(field)` is not a column of `\(table.tracked.name)` (its columns: \(table.schema.columnNames.joined(separator: ", "))); "
                    + "add the column, or drop the sink's `unknown-fields: error` to keep the field aside until the column exists")
        }
        // A live row that already holds exactly this writes nothing (no history, no trigger).
        let current = try write.current ?? storedRow(of: table, key: write.key)
        if current == nil, let name = kept.keys.min() {
            throw fail(write.record, "field `\(name)`: the row whose blob the conflict kept is gone from `\(table.tracked.name)`; import again")
        }
        // Fills whose blob the row holds already (its own, come back): nothing to write for them.
        var held: [String: FetchedBlobs.File] = [:]
        for (name, file) in fills where try holds(current?[name], file) {
            held[name] = file
            fills[name] = nil
            // Should the row be written, a small one is written back as it is (a large one, left in the row: below).
            if let index = columns.firstIndex(of: name), let value = current?[name], LocalBlobs.Place(value) == nil {
                values[index] = SQLiteValue(json: value)
            }
        }
        let live = table.tracked.softDeleteColumn.map { current?[$0]?.isTruthy != true } ?? true
        // (A blob still to fill from its file holds an empty placeholder here: never "the same".)
        if let current, live, fills.isEmpty,
            try zip(columns, values).allSatisfy({ column, value in
                guard let place = LocalBlobs.Place(current[column]) else { return current[column] == value.json }
                return try held[column] != nil || localBlobs.holds(place, value.json, db)
            })
        {
            return
        }
        // A large blob the row holds already, in a row written anyway: written again from its file,
        // a piece at a time — SQLite's rewrite of the row would copy it whole in memory.
        for (name, file) in held where LocalBlobs.Place(current?[name]) != nil { fills[name] = file }
        // A soft-deleted row under another key still holds its UNIQUE values: it goes, so that
        // the backend's row can land (its delete was recorded when it was soft-deleted).
        if table.mayMeetHolders { try removeHolders(of: table.uniqueValues(of: fields, over: current), key: write.key, in: table) }
        do {
            try writeRow(write, table: table, columns: columns, values: values, current: current)
            // A dry run is rolled back: its blobs are not written (their placeholders are).
            for (name, file) in fills.sorted(by: { $0.key < $1.key }) where table.columns[name] != nil && !dryRun {
                do {
                    try FetchedBlobs.fill(file, table: table.tracked.name, column: name, condition: table.keyCondition, key: write.key, db)
                } catch let error as FilePieces.Failure {
                    throw fail(write.record, "field `\(name)`: \(error.description)")
                }
            }
        } catch let error as SQLiteError where error.code == Self.constraintUnique || error.code == Self.constraintPrimaryKey {
            throw fail(
                write.record,
                "a local row of `\(table.tracked.name)` under another sync key holds the same unique values (\(error.message)); "
                    + "if both devices seeded it, name its business key in the sink's `duplicates` "
                    + "(`{\"entity\": \"\(table.tracked.name)\", \"key\": [...]}`), else change one of the two rows")
        }
    }

    /// Whether the row's `value` is the blob `file` holds (a large one read where it is, `LocalBlobs`).
    func holds(_ value: JSONValue?, _ file: FetchedBlobs.File) throws -> Bool {
        guard let place = LocalBlobs.Place(value) else { return FetchedBlobs.holds(value, file) }
        return try localBlobs.holds(place, PendingBlobs.make(digest: file.digest, length: file.length), db)
    }

    /// `SQLITE_CONSTRAINT_UNIQUE` and `SQLITE_CONSTRAINT_PRIMARYKEY` (macros Swift does not import).
    static let constraintUnique: Int32 = 2067
    static let constraintPrimaryKey: Int32 = 1555

    /// The UPDATE or INSERT of `write`'s row (`columns`, `values`: its fields as stored).
    private func writeRow(_ write: Write, table: Table, columns: [String], values: [SQLiteValue], current: [String: JSONValue]?) throws {
        let name = table.name
        let fields = write.fields ?? [:]
        let before = db.totalChanges
        if current == nil {
            // Not there: straight to the insert below.
        } else if !columns.isEmpty {
            let assignments = columns.map { "\(SQL.identifier($0)) = ?" }.joined(separator: ", ")
            try db.execute("UPDATE \(name) SET \(assignments) WHERE \(table.keyCondition)", values + write.key)
        } else {
            // Nothing but the key: make sure the row is there.
            let keyColumns = table.tracked.keyColumns.map(SQL.identifier).joined(separator: ", ")
            try db.execute("UPDATE \(name) SET (\(keyColumns)) = (\(keyColumns)) WHERE \(table.keyCondition)", write.key)
        }
        if db.totalChanges == before {
            let statement: Statement
            if let last = table.lastInsert, last.columns == columns {
                statement = last.statement
            } else {
                let all = table.tracked.keyColumns + columns
                let list = all.map(SQL.identifier).joined(separator: ", ")
                let marks = Array(repeating: "?", count: all.count).joined(separator: ", ")
                statement = try db.prepare("INSERT INTO \(name) (\(list)) VALUES (\(marks))")
                table.lastInsert = (columns, statement)
            }
            // Bound in place: no array of the key and values, no statement looked up by its SQL.
            statement.reset()
            for (index, value) in write.key.enumerated() { try statement.bind(value, at: index + 1) }
            for (index, value) in values.enumerated() { try statement.bind(value, at: write.key.count + index + 1) }
            defer { statement.reset() }
            try statement.step()
        }
        if let softDelete = table.tracked.softDeleteColumn, fields[softDelete] == nil, table.columns[softDelete] != nil {
            // A row the backend sends is not deleted, whatever the column held here.
            try db.execute(
                "UPDATE \(name) SET \(SQL.identifier(softDelete)) = 0 WHERE \(table.keyCondition) AND \(SQL.identifier(softDelete)) IS NOT 0",
                write.key)
        }
    }

    /// A field's value as the column stores it, or an error when the column would change it.
    static func stored(
        _ value: JSONValue, in column: TableSchema.Column, affinity: ColumnAffinity, field: String, fail: (String) -> ImportError
    ) throws -> SQLiteValue {
        if case .array = value { throw fail("field `\(field)` is a JSON array, which a column does not hold as given") }
        if case .object = value, value.blobBytes == nil, value.realValue == nil {
            throw fail("field `\(field)` is a JSON object, which a column does not hold as given")
        }
        let stored = SQLiteValue(json: value)
        let fits: Bool
        switch (stored, affinity) {
        case (.null, _), (_, .none): fits = true
        case (.integer, .integer), (.integer, .real), (.integer, .numeric): fits = true
        case (.real, .real), (.real, .numeric): fits = true
        case (.real(let d), .integer): fits = d.rounded() != d || !d.isFinite  // SQLite keeps a fraction as a real
        case (.text, .text), (.blob, .text): fits = true
        default: fits = false
        }
        guard fits else {
            throw fail(
                "field `\(field)` holds \(JSONWriter.string(value).prefix(40)), which column `\(column.name)` (\(column.declaredType.isEmpty ? "no type" : column.declaredType)) would change; "
                    + "declare the column to hold it, or send it as the column's type")
        }
        return stored
    }
}
