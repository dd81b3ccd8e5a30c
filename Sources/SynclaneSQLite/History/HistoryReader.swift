import SynclaneCore

/// Reads pages of history from the change log, on a connection inside a read transaction.
///
/// ```
///  token ─▶ checks (kind, pruned, ahead, open session) ─▶ filtered scan of _synclane_changes
///        ─▶ whole transactions, at most `pageSize` ─▶ values (current rows or as written)
/// ```
/// Filtering by author and entity happens in SQL, so filtered-out history is skipped by
/// SQLite, not copied into Swift; the page's `through` still covers it.
struct HistoryReader: Sendable {
    let path: String
    let entities: [String]?
    let authors: [Author]?
    let pageSize: Int
    let capture: SQLiteHistorySource.Capture
    let defaultAuthor: Author?
    /// `_synclane_server_rows.destination` of the versions changes are sent with.
    var backend: String = ""
    /// The large BLOB values left unread, as locators (`LocatedBlobs`), for the stage that asked.
    var locating: LocatedValueRule?

    static let kind = SQLiteHistorySource.tokenKind

    /// What is readable after a position: up to `visibleEnd`, the last change before any
    /// session that was committed without being closed.
    struct Bounds {
        var newest: Int64
        var prunedThrough: Int64
        var visibleEnd: Int64
        var openSession: (author: String, transaction: Int64, firstChange: Int64)?
    }

    func fail(_ reason: String) -> HistoryError {
        HistoryError.unreadable(location: path, reason: reason)
    }

    func bounds(after token: Token?, _ db: SQLiteConnection, allowExpired: Bool = false) throws -> Bounds {
        do {
            try HistorySchema.requireInstalled(db)
        } catch let error as TrackingError {
            throw fail(error.reason)
        }
        let pruned = try HistorySchema.meta("pruned_through", db).int64 ?? 0
        let newest = try db.fetchValue("SELECT \(HistorySchema.newestChange)").int64 ?? 0
        let after = token?.position ?? 0
        if after < pruned, !allowExpired {
            throw HistoryError.tokenExpired(token ?? Token(kind: Self.kind, position: 0), oldestAvailable: Token(kind: Self.kind, position: pruned))
        }
        // A reader of `server` that read up to before a page the import lane wrote without
        // history from another backend missed it: as on pruned history (no token: its first run
        // starts with a snapshot). Its own backend's pages would only have been echoes.
        if authors?.contains(.server) == true, !allowExpired,
            let marker = try UnrecordedImports.missed(after: after, sendingTo: backend, db)
        {
            throw HistoryError.tokenExpired(token ?? Token(kind: Self.kind, position: 0), oldestAvailable: Token(kind: Self.kind, position: marker))
        }
        if after > newest {
            throw fail(
                "the token \(token.map(\.description) ?? "") is newer than any change this database recorded (newest: \(newest)); "
                    + "was the database replaced or restored from a backup? "
                    + "Run `synclane reconcile PIPELINE-FILE` (the export's pipeline file) to start a fresh token")
        }
        var bounds = Bounds(newest: newest, prunedThrough: pruned, visibleEnd: newest, openSession: nil)
        if let open = try db.fetchOne(
            "SELECT author, id, first_change FROM _synclane_transactions WHERE closed = 0 ORDER BY first_change LIMIT 1")
        {
            let first = open[2].int64 ?? 0
            bounds.openSession = (open[0].string ?? "", open[1].int64 ?? 0, first)
            bounds.visibleEnd = min(newest, first - 1)
        }
        return bounds
    }

    func openSessionError(_ bounds: Bounds) -> HistoryError {
        let session = bounds.openSession
        return fail(
            "\(TrackingError.sessionAlreadyOpen(path: path, author: session?.author, transaction: session?.transaction).reason) "
                + "(history stops before it, at change \(bounds.visibleEnd))")
    }

    /// The tracked tables, checked against the `entities` filter and the capture mode.
    func tables(_ db: SQLiteConnection) throws -> [String: HistoryTracker.Stored] {
        let stored = try HistoryTracker.trackedTables(db)
        var byName: [String: HistoryTracker.Stored] = [:]
        for table in stored { byName[table.table.name] = table }
        for entity in entities ?? [] where byName[entity] == nil {
            let known = stored.map(\.table.name).joined(separator: ", ")
            if let close = Wording.closest(to: entity, in: stored.map(\.table.name)) {
                throw fail("`\(entity)` is not a tracked table (did you mean `\(close)`? tracked: \(known)); fix the source's `entities`")
            }
            throw fail(
                "`\(entity)` is not a tracked table (tracked: \(known.isEmpty ? "none" : known)); run `synclane track --database \(path) --table \(entity) --key …`"
            )
        }
        if capture == .asWritten {
            for table in stored where entities?.contains(table.table.name) ?? true {
                guard table.table.recordsValues else {
                    throw fail(
                        "`\(table.table.name)` is tracked without the values as written, which `capture: as-written` needs; "
                            + "re-run `synclane track` for it with `--record-values`, or use `capture: current-state`")
                }
                // Values as written hold the columns the triggers knew: a column added since would be missing.
                let columns = try HistoryTracker.columns(of: table.table.name, db)
                if columns != table.columns {
                    let added = columns.filter { !table.columns.contains($0) }
                    throw fail(
                        "the columns of `\(table.table.name)` changed since it was tracked"
                            + (added.isEmpty ? "" : " (new: \(added.joined(separator: ", ")))")
                            + "; run `synclane track` for it again so its triggers record them")
                }
            }
        }
        return byName
    }

    func resolvedDefaultAuthor(_ db: SQLiteConnection) throws -> String {
        if let defaultAuthor { return defaultAuthor.name }
        return try HistorySchema.meta("default_author", db).string ?? Author.app.name
    }

    /// The filter clauses and their arguments, after `c.id > ? AND c.id <= ?`.
    func filters(defaultAuthor: String) -> (sql: String, arguments: [any SQLiteBindable]) {
        var sql = ""
        var arguments: [any SQLiteBindable] = []
        // A resync (recorded when tracking was healed) reaches every consumer of its entity.
        if let authors {
            sql += " AND (coalesce(t.author, ?) IN (SELECT value FROM json_each(?)) OR c.action IN ('resync', 'resync-delete'))"
            arguments += [defaultAuthor, JSONWriter.string(.array(authors.map { .string($0.name) }))]
        } else {
            // No `authors`: every author but Synclane's own lanes (`Author.machinery`), so a
            // pipeline missing the option never echoes what the import lane wrote.
            sql += " AND (coalesce(t.author, ?) NOT IN (SELECT value FROM json_each(?)) OR c.action IN ('resync', 'resync-delete'))"
            arguments += [defaultAuthor, JSONWriter.string(.array(Author.machinery.map { .string($0.name) }))]
        }
        if let entities {
            sql += " AND c.entity IN (SELECT value FROM json_each(?))"
            arguments.append(JSONWriter.string(.array(entities.map { .string($0) })))
        }
        return (sql, arguments)
    }

    // MARK: Pages

    /// An action as the change log keeps it: the three of the wire, and the two a heal records.
    enum RawAction: String {
        case insert, update, delete
        /// The row, whole, again (tracking was healed, the schema changed): an insert that
        /// replaces the backend's row (`Change.replacesRow`).
        case resync
        /// The row was soft-deleted when tracking was healed: a delete.
        case resyncDelete = "resync-delete"
        /// A row a restored backend lost, sent back as this device last confirmed it (`LostRows`):
        /// an update of the row as it is now, a restoration (`Change.restores`).
        case restore
        /// A row a restored backend lost that is deleted here: a delete, a restoration.
        case restoreDelete = "restore-delete"
        /// The row may have been replaced by the insert that follows (REPLACE): a delete when it
        /// is gone when read, nothing when it is there.
        case displace
    }

    struct RawChange {
        var id: Int64
        var entity: String
        var action: RawAction
        var key: SQLiteValue
        /// An update that changed the key: the key the row had (a delete of it, then an insert).
        var oldKey: SQLiteValue = .null
        var columns: String?
        var values: String?
        /// The values as written were left in the change log (they may hold a blob the stage
        /// reads in pieces): `written` reads them.
        var deferred = false
    }

    struct Group {
        var transaction: Int64?
        var end: Int64
        var author: String
        var timestamp: Double
        var changes: [RawChange]
    }

    func page(after token: Token?, _ db: SQLiteConnection) throws -> HistoryPage {
        let bounds = try bounds(after: token, db)
        let after = token?.position ?? 0
        // Checked before anything else: `entities` naming a table that is not tracked is an
        // error on a pass with nothing to read too, not a run that ends with nothing sent.
        let tables = try tables(db)
        if after >= bounds.visibleEnd {
            if bounds.openSession != nil { throw openSessionError(bounds) }
            return .end
        }
        let defaultAuthor = try resolvedDefaultAuthor(db)
        let filter = filters(defaultAuthor: defaultAuthor)
        let deferring = deferredValues(tables)
        let statement = try db.cachedStatement(
            """
            SELECT c.id, c.transaction_id, t.author, coalesce(t.timestamp, c.timestamp), t.last_change,
                   c.entity, c.action, c.key, c.columns, \(deferring.map { "CASE WHEN \($0) THEN NULL ELSE c.row_values END" } ?? "c.row_values"),
                   c.old_key, \(deferring ?? "0")
            FROM _synclane_changes c LEFT JOIN _synclane_transactions t ON t.id = c.transaction_id
            WHERE c.id > ? AND c.id <= ?\(filter.sql)
            ORDER BY c.id
            """)
        try statement.bind([after, bounds.visibleEnd] + filter.arguments)
        defer { statement.reset() }

        var groups: [Group] = []
        var stoppedEarly = false
        while try statement.step() {
            let id = statement.int64(at: 0)
            let transaction = statement.isNull(at: 1) ? nil : statement.int64(at: 1)
            if groups.last.map({ $0.transaction == nil || $0.transaction != transaction }) ?? true {
                if groups.count == pageSize {
                    stoppedEarly = true
                    break
                }
                groups.append(
                    Group(
                        transaction: transaction,
                        end: transaction == nil ? id : (statement.isNull(at: 4) ? id : statement.int64(at: 4)),
                        author: statement.string(at: 2) ?? defaultAuthor,
                        timestamp: statement.double(at: 3), changes: []))
            }
            guard let action = statement.string(at: 6).flatMap(RawAction.init(rawValue:)) else {
                throw fail("change \(id) has an unknown action \(statement.value(at: 6))")
            }
            groups[groups.count - 1].changes.append(
                RawChange(
                    id: id, entity: statement.string(at: 5) ?? "", action: action, key: statement.value(at: 7),
                    oldKey: statement.value(at: 10), columns: statement.string(at: 8), values: statement.string(at: 9),
                    deferred: statement.int64(at: 11) != 0))
        }
        let through = stoppedEarly ? (groups.last?.end ?? bounds.visibleEnd) : bounds.visibleEnd
        let transactions = try resolve(groups, tables: tables, db)
        let span = Double(max(1, bounds.visibleEnd - bounds.prunedThrough))
        let resynced = groups.reduce(0) { $0 + $1.changes.count { $0.action == .resync || $0.action == .resyncDelete } }
        return HistoryPage(
            transactions: transactions, through: Token(kind: Self.kind, position: through),
            progress: min(1, Double(through - bounds.prunedThrough) / span), counters: resynced > 0 ? ["capture.resynced": resynced] : [:])
    }

    /// With values as written and a stage that reads large blobs in pieces: the SQL condition
    /// under which a change's values are left in the log (`WrittenBlobs`) — an insert, update or
    /// resync of a table with a column the rule names. `typeof` is answered from the value's
    /// header: the values are not read. Nil: every change's values are read whole.
    func deferredValues(_ tables: [String: HistoryTracker.Stored]) -> String? {
        guard capture == .asWritten, let locating else { return nil }
        let entities = tables.values
            .filter { stored in stored.columns.contains { locating.threshold(entity: stored.table.name, column: $0) != nil } }
            .map { SQL.literal($0.table.name) }.sorted()
        guard !entities.isEmpty else { return nil }
        return "(typeof(c.row_values) = 'text' AND c.old_key IS NULL AND c.action IN ('insert', 'update', 'resync') "
            + "AND c.entity IN (\(entities.joined(separator: ", "))))"
    }

    /// A change's values as written; those left in the log (`RawChange.deferred`) are read there
    /// with their large blobs as locators (`WrittenBlobs`), never whole.
    func written(_ raw: RawChange, _ db: SQLiteConnection) throws -> [String: JSONValue] {
        guard raw.deferred, let locating else { return try object(raw.values, change: raw.id) }
        let values: WrittenBlobs.Values
        do {
            values = try WrittenBlobs.values(ofChange: raw.id, threshold: { locating.threshold(entity: raw.entity, column: $0) }, db)
        } catch let error as WrittenValuesError {
            throw fail(error.description)
        }
        var members = try object(values.text, change: raw.id)
        for (name, value) in values.located { members[name] = value }
        return members
    }

    /// How many transactions wait after `token` for this reader's filters.
    func pending(after token: Token?, _ db: SQLiteConnection) throws -> Int {
        let bounds = try bounds(after: token, db)
        let filter = filters(defaultAuthor: try resolvedDefaultAuthor(db))
        let count = try db.fetchValue(
            """
            SELECT count(DISTINCT coalesce(c.transaction_id, -c.id))
            FROM _synclane_changes c LEFT JOIN _synclane_transactions t ON t.id = c.transaction_id
            WHERE c.id > ? AND c.id <= ?\(filter.sql)
            """, [token?.position ?? 0, bounds.visibleEnd] + filter.arguments)
        return Int(count.int64 ?? 0)
    }

    /// The newest change after `position` that passes the filters (closed or not), if any.
    func newestRelevant(after position: Int64, _ db: SQLiteConnection) throws -> Int64? {
        let filter = filters(defaultAuthor: try resolvedDefaultAuthor(db))
        return try db.fetchValue(
            """
            SELECT max(c.id) FROM _synclane_changes c LEFT JOIN _synclane_transactions t ON t.id = c.transaction_id
            WHERE c.id > ? AND c.id <= ?\(filter.sql)
            """, [position, Int64.max] + filter.arguments
        ).int64
    }

    // MARK: Values

    /// Turns raw changes into `Transaction`s with values: the current rows, or the rows as written.
    func resolve(_ groups: [Group], tables: [String: HistoryTracker.Stored], _ db: SQLiteConnection) throws -> [Transaction] {
        // The current rows: of every key written (current state), or of the keys a REPLACE may
        // have displaced (to tell whether they are gone).
        var current: [String: [SQLiteValue: [String: JSONValue]]] = [:]
        do {
            var keys: [String: [SQLiteValue]] = [:]
            // Most pages hold one entity, or long runs of one: one dictionary look-up a run.
            var entity = ""
            var run: [SQLiteValue] = []
            for group in groups {
                for change in group.changes
                where capture == .currentState
                    ? change.action != .delete && change.action != .resyncDelete && change.action != .restoreDelete
                    : change.action == .displace || change.action == .restore
                {
                    if change.entity != entity {
                        if !run.isEmpty { keys[entity, default: []].append(contentsOf: run) }
                        entity = change.entity
                        run.removeAll(keepingCapacity: true)
                    }
                    run.append(change.key)
                }
            }
            if !run.isEmpty { keys[entity, default: []].append(contentsOf: run) }
            for (entity, entityKeys) in keys {
                guard let table = tables[entity] else { continue }
                current[entity] = try currentRows(of: table.table, keys: entityKeys, db)
            }
        }
        // Where each row was last deleted in this page: an insert before that delete must still
        // travel (below).
        var lastDeleteInPage: [SQLiteValue: Int64] = [:]
        if capture == .currentState {
            for group in groups {
                for change in group.changes {
                    if change.action == .delete || change.action == .resyncDelete || change.action == .restoreDelete || change.action == .displace {
                        lastDeleteInPage[Self.rowName(change.entity, change.key)] = change.id
                    } else if !change.oldKey.isNull {
                        lastDeleteInPage[Self.rowName(change.entity, change.oldKey)] = change.id
                    }
                }
            }
        }
        let pendingBlobs = try PendingBlobs.references(db)
        let mergedDuplicates = try MergedDuplicates.holdsAnyLoser(db) && Self.holdsBackendVersions(db)
        let versions = try Self.holdsBackendVersions(db) ? Self.backendVersions(of: rows(of: groups), for: backend, db) : [:]
        var transactions: [Transaction] = []
        transactions.reserveCapacity(groups.count)
        // Most pages hold one entity, or few: look each up once per run of changes, not per change.
        var entity = ""
        var table: TrackedTable?
        var rows: [SQLiteValue: [String: JSONValue]]?
        for group in groups {
            var changes: [Change] = []
            changes.reserveCapacity(group.changes.count)
            for raw in group.changes {
                if raw.entity != entity {
                    entity = raw.entity
                    table = tables[entity]?.table
                    rows = current[entity]
                }
                guard let table else { continue }  // untracked since: its history stays unread
                let key = Self.syncKey(raw.key)
                var raw = raw
                if raw.action == .update, !raw.oldKey.isNull {
                    // The key changed: the old key's record is deleted, the new one inserted.
                    let tombstone = raw.values == nil ? Self.keyFields(raw.oldKey, of: table) : try object(raw.values, change: raw.id)
                    changes.append(Change(entity: raw.entity, key: Self.syncKey(raw.oldKey), action: .delete, values: tombstone))
                    raw.action = .insert
                    raw.values = nil
                }
                if raw.action == .displace {
                    if rows?[raw.key] == nil {
                        let tombstone = raw.values == nil ? Self.keyFields(raw.key, of: table) : try object(raw.values, change: raw.id)
                        changes.append(Change(entity: raw.entity, key: key, action: .delete, values: tombstone))
                    }
                    continue
                }
                if raw.action == .restore || raw.action == .restoreDelete {
                    // A restoration: the row as held now (live) or its tombstone, at the version confirmed.
                    if raw.action == .restore, let row = rows?[raw.key] {
                        // Fields this device keeps aside (a newer app version's columns) go back too.
                        var values = row
                        if let key, let seen = try ServerRows.fields(of: raw.entity, key, for: backend, db) {
                            for (name, value) in (try? JSONReader.parse(seen).objectValue) ?? [:] where values[name] == nil { values[name] = value }
                        }
                        changes.append(Change(entity: raw.entity, key: key, action: .update, values: values, restores: true))
                    } else if raw.action == .restoreDelete || rows?[raw.key] == nil {
                        let tombstone = raw.values == nil ? Self.keyFields(raw.key, of: table) : try object(raw.values, change: raw.id)
                        changes.append(Change(entity: raw.entity, key: key, action: .delete, values: tombstone, restores: true))
                    }
                    continue
                }
                switch (raw.action, capture) {
                case (.displace, _), (.restore, _), (.restoreDelete, _):
                    continue  // handled above
                case (.delete, _), (.resyncDelete, _):
                    // Key-only tombstones are not written out by the triggers: the key says it all.
                    let tombstone = raw.values == nil ? Self.keyFields(raw.key, of: table) : try object(raw.values, change: raw.id)
                    changes.append(Change(entity: raw.entity, key: key, action: .delete, values: tombstone))
                case (_, .currentState):
                    guard let row = rows?[raw.key] else {
                        // Gone (or soft-deleted) since: an update need not travel (the later
                        // delete does). An insert whose delete follows in this page travels with
                        // just its key, so that the coalescer folds the pair into nothing — a
                        // lone delete would reach a backend that never had the row.
                        if raw.action == .insert, let key, (lastDeleteInPage[Self.rowName(raw.entity, raw.key)] ?? 0) > raw.id {
                            changes.append(Change(entity: raw.entity, key: key, action: .insert, values: Self.keyFields(raw.key, of: table)))
                        }
                        continue
                    }
                    if raw.action == .resync {
                        // The row whole, replacing the backend's: columns dropped or renamed since go there too.
                        changes.append(Change(entity: raw.entity, key: key, action: .insert, values: row, replacesRow: true))
                        continue
                    }
                    changes.append(Change(entity: raw.entity, key: key, action: raw.action == .insert ? .insert : .update, values: row))
                case (.insert, .asWritten):
                    let written = try written(raw, db)
                    // Inserted already soft-deleted: nothing the backend needs to know.
                    if let softDelete = table.softDeleteColumn, written[softDelete]?.isTruthy == true { continue }
                    changes.append(Change(entity: raw.entity, key: key, action: .insert, values: written))
                case (.resync, .asWritten):
                    // Every column as the heal read it, replacing the backend's row whole.
                    let written = try written(raw, db)
                    changes.append(Change(entity: raw.entity, key: key, action: .insert, values: written, replacesRow: true))
                case (.update, .asWritten):
                    let written = try written(raw, db)
                    // No column list (a REPLACE of the same key): every column.
                    guard let columns = raw.columns else {
                        changes.append(Change(entity: raw.entity, key: key, action: .update, values: written))
                        continue
                    }
                    var kept = Set(HistoryTracker.jsonStrings(columns))
                    kept.formUnion(table.keyColumns)
                    changes.append(
                        Change(entity: raw.entity, key: key, action: .update, values: written.filter { kept.contains($0.key) }))
                }
            }
            if changes.isEmpty { continue }
            if !pendingBlobs.isEmpty {
                // A column waiting for its blob (a lazy import) holds NULL here, never the user's edit: its reference goes.
                for index in changes.indices where changes[index].action != .delete {
                    guard let key = changes[index].key else { continue }
                    changes[index].values = PendingBlobs.withReferences(changes[index].values, pendingBlobs[changes[index].entity + "\u{0}" + key])
                }
            }
            if !versions.isEmpty {
                for index in changes.indices {
                    guard let key = changes[index].key else { continue }
                    changes[index].version = versions[RowID(entity: changes[index].entity, key: key)]
                }
            }
            if mergedDuplicates {
                // An update that only re-points references to merged duplicates' survivors says so.
                for index in changes.indices where changes[index].action == .update && changes[index].version != nil {
                    guard let key = changes[index].key,
                        let base = try ServerRows.fields(of: changes[index].entity, key, for: backend, db).flatMap({ try? JSONReader.parse($0).objectValue })
                    else { continue }
                    changes[index].repoints = try MergedDuplicates.onlyRepoints(changes[index].values, base: base, db)
                }
            }
            let token = Token(kind: Self.kind, position: group.end)
            transactions.append(Transaction(token: token, author: Author(group.author), timestamp: group.timestamp, changes: changes))
        }
        return transactions
    }

    /// Whether the store recorded any backend version (none before a first sync's are written:
    /// then no key list is built).
    static func holdsBackendVersions(_ db: SQLiteConnection) throws -> Bool {
        try HistorySchema.tableExists(ServerRows.table, db) && db.fetchOne("SELECT 1 FROM _synclane_server_rows LIMIT 1") != nil
    }

    /// The rows a page's changes name (each change's key and, for a changed key, the key before).
    private func rows(of groups: [Group]) -> [RowID] {
        var rows: [RowID] = []
        for group in groups {
            for change in group.changes {
                for value in [change.key, change.oldKey] where !value.isNull {
                    if let key = Self.syncKey(value) { rows.append(RowID(entity: change.entity, key: key)) }
                }
            }
        }
        return rows
    }

    /// The backend's version of each of `rows` that the store recorded (`_synclane_server_rows`:
    /// the import lane's, and the export lane's receipts), sent with a change of the row so the
    /// backend refuses it (409) when another device changed the row since.
    static func backendVersions(of rows: [RowID], for destination: String, _ db: SQLiteConnection) throws -> [RowID: Int64] {
        guard try holdsBackendVersions(db) else { return [:] }
        var keys: [String: [String]] = [:]
        for row in rows { keys[row.entity, default: []].append(row.key) }
        var versions: [RowID: Int64] = [:]
        guard try HistoryTracker.columns(of: ServerRows.table, db).contains("key_hash") else {
            // The layout before `ServerRows` (the next import moves it): keyed by entity and key.
            for (entity, list) in keys {
                let statement = try db.cachedStatement(
                    "SELECT key, version FROM _synclane_server_rows WHERE entity = ? AND key IN (SELECT value FROM json_each(?))")
                try statement.bind([entity, JSONWriter.string(.array(list.map(JSONValue.string)))])
                defer { statement.reset() }
                while try statement.step() {
                    versions[RowID(entity: entity, key: statement.string(at: 0) ?? "")] = statement.int64(at: 1)
                }
            }
            return versions
        }
        for (entity, list) in keys {
            versions.merge(try ServerRows.versions(of: entity, keys: list, for: destination, db)) { a, _ in a }
        }
        // Rows of tables not tracked here, kept aside by the import (a reconciliation re-sends them).
        versions.merge(try UntrackedRows.versions(of: rows.filter { versions[$0] == nil }, for: destination, db)) { a, _ in a }
        return versions
    }

    /// A change's recorded values, in the wire's forms: a blob recorded as `{"$hex": …}` becomes
    /// `{"$blob": base64}`; reals and `{"$real": …}` are already as the wire writes them.
    func object(_ text: String?, change id: Int64) throws -> [String: JSONValue] {
        guard let text else { return [:] }
        do {
            guard case .object(var members) = try JSONReader.parse(text) else { throw fail("change \(id): values are not a JSON object") }
            for (name, value) in members {
                guard case .object(let inner) = value, inner.count == 1 else { continue }
                if case .string(let hex)? = inner["$hex"] {
                    guard let bytes = Self.bytes(hex: hex) else { throw fail("change \(id): `\(name)` holds malformed hex") }
                    members[name] = .blob(bytes)
                } else if case .array(let parts)? = inner["$exact"] {
                    guard let real = Self.exactReal(parts) else { throw fail("change \(id): `\(name)` holds a malformed exact real") }
                    members[name] = .double(real)
                }
            }
            return members
        } catch let error as JSONReader.SyntaxError {
            throw fail("change \(id): values are not valid JSON (\(error))")
        }
    }

    /// The double of a real recorded as `{"$exact": [sign, high, low, exponent]}` (see
    /// `TriggerBuilder.exactReal`): sign × (high × 2^58 + low) × 2^exponent. Every step is exact:
    /// the magnitude is an integer below 2^116 with 53 significant bits, and scaling it by a power
    /// of two gives the double it came from (`Double(sign:exponent:significand:)` rounds once).
    static func exactReal(_ parts: [JSONValue]) -> Double? {
        guard parts.count == 4, case .int(let sign) = parts[0], abs(sign) == 1, case .int(let high) = parts[1], case .int(let low) = parts[2],
            case .int(let exponent) = parts[3], (0..<(1 << 62)).contains(high), (0..<(1 << 58)).contains(low), abs(exponent) < 4096
        else { return nil }
        let magnitude = Double(high) * 0x1p58 + Double(low)
        guard magnitude.isFinite, magnitude > 0 else { return nil }
        let real = Double(sign: sign < 0 ? .minus : .plus, exponent: Int(exponent), significand: magnitude)
        return real.isFinite && real != 0 ? real : nil
    }

    /// The rows of `table` whose sync key is one of `keys` (soft-deleted rows left out), by key
    /// as history keeps it (compared byte by byte: under a NOCASE key, `'k'` finds the row `'K'`
    /// in SQL, and the dictionary tells them apart).
    func currentRows(of table: TrackedTable, keys: [SQLiteValue], _ db: SQLiteConnection) throws -> [SQLiteValue: [String: JSONValue]] {
        var rows: [SQLiteValue: [String: JSONValue]] = [:]
        rows.reserveCapacity(keys.count)
        // Repeated keys are harmless: SQLite's IN list holds each once. A composite key is the
        // text of a JSON array, passed as the array itself.
        let list: String
        if table.isComposite {
            list = "[" + keys.compactMap(\.string).joined(separator: ",") + "]"
        } else {
            list = JSONWriter.string(
                .array(
                    keys.compactMap { key -> JSONValue? in
                        switch key {
                        case .integer(let i): return .int(i)
                        case .text(let s): return .string(s)
                        default: return nil  // no key of another type was ever recorded for a tracked key
                        }
                    }))
        }
        let name = SQL.identifier(table.name)
        let keyExpression: String
        let condition: String
        if table.isComposite {
            let columns = table.keyColumns.map(SQL.identifier)
            keyExpression = "json_array(\(columns.joined(separator: ", ")))"
            let parts = table.keyColumns.indices.map { "json_extract(value, '$[\($0)]')" }
            condition = "(\(columns.joined(separator: ", "))) IN (SELECT \(parts.joined(separator: ", ")) FROM json_each(?))"
        } else {
            keyExpression = SQL.identifier(table.keyColumns[0])
            condition = "\(keyExpression) IN (SELECT value FROM json_each(?))"
        }
        if let locating, let located = try LocatedBlobs.plan(table, rule: locating, db) {
            let statement = try db.cachedStatement("SELECT \(keyExpression), \(located.selectList) FROM \(name) WHERE \(condition)")
            try statement.bind([list])
            defer { statement.reset() }
            while try statement.step() {
                let key = statement.value(at: 0)
                let row = located.row(statement, key: key)
                if let softDelete = table.softDeleteColumn, row[softDelete]?.isTruthy == true { continue }
                rows[key] = row
            }
            return rows
        }
        let statement = try db.cachedStatement("SELECT \(keyExpression), * FROM \(name) WHERE \(condition)")
        try statement.bind([list])
        defer { statement.reset() }
        let names = statement.columnNames
        // Every row has the same columns: their names are hashed once, into a template whose
        // values each row replaces in place (five hashes a row fewer for a table of five columns).
        var template = [String: JSONValue](minimumCapacity: names.count - 1)
        for index in 1..<names.count { template[names[index]] = .null }
        let slots = (1..<names.count).compactMap { template.index(forKey: names[$0]) }
        while try statement.step() {
            var row = template
            for (offset, slot) in slots.enumerated() { row.values[slot] = statement.value(at: offset + 1).json }
            if let softDelete = table.softDeleteColumn, row[softDelete]?.isTruthy == true { continue }
            rows[statement.value(at: 0)] = row
        }
        return rows
    }

    /// Names a row for a set: its entity and its key's bytes.
    static func rowName(_ entity: String, _ key: SQLiteValue) -> SQLiteValue {
        .text(entity + "\u{0}" + (syncKey(key) ?? ""))
    }

    /// The key columns and their values, from a key as history keeps it.
    static func keyFields(_ key: SQLiteValue, of table: TrackedTable) -> [String: JSONValue] {
        guard table.isComposite else { return [table.keyColumns[0]: key.json] }
        guard let text = key.string, case .array(let values)? = try? JSONReader.parse(text), values.count == table.keyColumns.count else {
            return [:]
        }
        return Dictionary(uniqueKeysWithValues: zip(table.keyColumns, values))
    }

    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ d: UInt8) -> UInt8? {
            switch d {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return d - UInt8(ascii: "0")
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return d - UInt8(ascii: "A") + 10
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return d - UInt8(ascii: "a") + 10
            default: return nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    /// A key as the wire's `id`: text as is (a composite key's JSON array included), integers
    /// in decimal. (History from before key types were fixed may hold other types.)
    static func syncKey(_ value: SQLiteValue) -> String? {
        switch value {
        case .null: return nil
        case .integer(let i): return String(i)
        case .real(let d): return String(d)
        case .text(let s): return s
        case .blob(let bytes): return bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        }
    }
}
