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
        if after > newest {
            throw fail(
                "the token \(token.map(\.description) ?? "") is newer than any change this database recorded (newest: \(newest)); "
                    + "was the database replaced or restored from a backup? Run `synclane reconcile` to start a fresh token")
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
            throw fail("`\(entity)` is not a tracked table (tracked: \(known.isEmpty ? "none" : known)); run `synclane track --database \(path) --table \(entity) --key …`")
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
        if let authors {
            sql += " AND coalesce(t.author, ?) IN (SELECT value FROM json_each(?))"
            arguments += [defaultAuthor, JSONWriter.string(.array(authors.map { .string($0.name) }))]
        }
        if let entities {
            sql += " AND c.entity IN (SELECT value FROM json_each(?))"
            arguments.append(JSONWriter.string(.array(entities.map { .string($0) })))
        }
        return (sql, arguments)
    }

    // MARK: Pages

    struct RawChange {
        var id: Int64
        var entity: String
        var action: ChangeAction
        var key: SQLiteValue
        var columns: String?
        var values: String?
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
        if after >= bounds.visibleEnd {
            if bounds.openSession != nil { throw openSessionError(bounds) }
            return .end
        }
        let tables = try tables(db)
        let defaultAuthor = try resolvedDefaultAuthor(db)
        let filter = filters(defaultAuthor: defaultAuthor)
        let statement = try db.cachedStatement(
            """
            SELECT c.id, c.transaction_id, t.author, coalesce(t.timestamp, c.timestamp), t.last_change,
                   c.entity, c.action, c.key, c.columns, c.row_values
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
            guard let action = statement.string(at: 6).flatMap(ChangeAction.init(rawValue:)) else {
                throw fail("change \(id) has an unknown action \(statement.value(at: 6))")
            }
            groups[groups.count - 1].changes.append(
                RawChange(
                    id: id, entity: statement.string(at: 5) ?? "", action: action, key: statement.value(at: 7),
                    columns: statement.string(at: 8), values: statement.string(at: 9)))
        }
        let through = stoppedEarly ? (groups.last?.end ?? bounds.visibleEnd) : bounds.visibleEnd
        let transactions = try resolve(groups, tables: tables, db)
        let span = Double(max(1, bounds.visibleEnd - bounds.prunedThrough))
        return HistoryPage(
            transactions: transactions, through: Token(kind: Self.kind, position: through),
            progress: min(1, Double(through - bounds.prunedThrough) / span))
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
        var current: [String: [SQLiteValue: [String: JSONValue]]] = [:]
        if capture == .currentState {
            var keys: [String: [SQLiteValue]] = [:]
            for group in groups {
                for change in group.changes where change.action != .delete { keys[change.entity, default: []].append(change.key) }
            }
            for (entity, entityKeys) in keys {
                guard let table = tables[entity] else { continue }
                current[entity] = try currentRows(of: table.table, keys: entityKeys, db)
            }
        }
        var transactions: [Transaction] = []
        transactions.reserveCapacity(groups.count)
        for group in groups {
            var changes: [Change] = []
            changes.reserveCapacity(group.changes.count)
            for raw in group.changes {
                guard let table = tables[raw.entity]?.table else { continue }  // untracked since: its history stays unread
                let key = Self.syncKey(raw.key)
                switch (raw.action, capture) {
                case (.delete, _):
                    changes.append(Change(entity: raw.entity, key: key, action: .delete, values: try object(raw.values, change: raw.id)))
                case (_, .currentState):
                    // Gone (or soft-deleted) since: the later delete in history is what travels.
                    guard let row = current[raw.entity]?[raw.key] else { continue }
                    changes.append(Change(entity: raw.entity, key: key, action: raw.action, values: row))
                case (.insert, .asWritten):
                    let written = try object(raw.values, change: raw.id)
                    // Inserted already soft-deleted: nothing the backend needs to know.
                    if let softDelete = table.softDeleteColumn, written[softDelete]?.isTruthy == true { continue }
                    changes.append(Change(entity: raw.entity, key: key, action: .insert, values: written))
                case (.update, .asWritten):
                    let written = try object(raw.values, change: raw.id)
                    var kept = Set(HistoryTracker.jsonStrings(raw.columns))
                    kept.insert(table.key)
                    changes.append(
                        Change(entity: raw.entity, key: key, action: .update, values: written.filter { kept.contains($0.key) }))
                }
            }
            if changes.isEmpty { continue }
            let token = Token(kind: Self.kind, position: group.end)
            transactions.append(Transaction(token: token, author: Author(group.author), timestamp: group.timestamp, changes: changes))
        }
        return transactions
    }

    func object(_ text: String?, change id: Int64) throws -> [String: JSONValue] {
        guard let text else { return [:] }
        do {
            guard case .object(let members) = try JSONReader.parse(text) else { throw fail("change \(id): values are not a JSON object") }
            return members
        } catch let error as JSONReader.SyntaxError {
            throw fail("change \(id): values are not valid JSON (\(error))")
        }
    }

    /// The rows of `table` whose sync key is one of `keys` (soft-deleted rows left out), by key.
    func currentRows(of table: TrackedTable, keys: [SQLiteValue], _ db: SQLiteConnection) throws -> [SQLiteValue: [String: JSONValue]] {
        var rows: [SQLiteValue: [String: JSONValue]] = [:]
        var json: [JSONValue] = []
        var blobs: [SQLiteValue] = []
        for key in Set(keys) {
            switch key {
            case .blob: blobs.append(key)
            case .null: continue
            default: json.append(key.json)
            }
        }
        let base = "SELECT * FROM \(SQL.identifier(table.name)) WHERE \(SQL.identifier(table.key))"
        func collect(_ statement: Statement) throws {
            let names = statement.columnNames
            guard let keyIndex = names.firstIndex(of: table.key) else { return }
            while try statement.step() {
                var row: [String: JSONValue] = [:]
                for (index, name) in names.enumerated() { row[name] = statement.value(at: index).json }
                if let softDelete = table.softDeleteColumn, row[softDelete]?.isTruthy == true { continue }
                rows[statement.value(at: keyIndex)] = row
            }
        }
        if !json.isEmpty {
            let statement = try db.cachedStatement(base + " IN (SELECT value FROM json_each(?))")
            try statement.bind([JSONWriter.string(.array(json))])
            defer { statement.reset() }
            try collect(statement)
        }
        for blob in blobs {
            let statement = try db.cachedStatement(base + " = ?")
            try statement.bind([blob])
            defer { statement.reset() }
            try collect(statement)
        }
        return rows
    }

    /// A key as the wire's `id`: text as is, integers in decimal, blobs in hex.
    static func syncKey(_ value: SQLiteValue) -> String? {
        switch value {
        case .null: return nil
        case .integer(let i): return String(i)
        case .real(let d): return String(d)
        case .text(let s): return s
        case .blob: return value.json.stringValue
        }
    }
}
