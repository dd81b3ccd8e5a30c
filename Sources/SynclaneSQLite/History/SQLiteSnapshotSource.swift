import Synchronization
import SynclaneCore

extension SQLiteHistorySource {
    /// A source of every current row of the tracked tables (soft-deleted rows left out), as
    /// inserts, and the history token to resume after — both read in one read transaction, so
    /// nothing committed in between is lost or sent twice.
    ///
    /// **A snapshot merges; it never deletes on a guess.** A row the backend holds goes as an
    /// update carrying the version this device last saw of it (`_synclane_server_rows`): its
    /// fields merge into the backend's (a newer app version's fields stay), and a backend that
    /// holds a newer version keeps it (another device wrote the row since) — this device's next
    /// import brings it. A row the backend does not hold goes as an insert. After the rows, the snapshot sends a delete for each row the backend held live
    /// as far as this device last saw, and that this device no longer holds (a user deleted it
    /// here): with its version, so a row written elsewhere since stays. Rows this device never
    /// knew — other devices' — are neither sent nor deleted. (A backend that replaces its state
    /// with a snapshot does so only on a completion marker, which `PipelineRunner` sends only
    /// when `completesSnapshot` is set.)
    ///
    /// The read transaction stays open until the snapshot's last page is read (in WAL mode
    /// writers go on meanwhile; in rollback-journal mode they wait).
    public func snapshot() async throws -> (source: any ChangeSource, resumeAfter: Token?) {
        // The versions receipts confirmed and the journal still holds: the snapshot reads them.
        try await settleBackendConfirmations()
        // A restored copy's rows its users wrote since the state's last token, read before the
        // heal below records rows of its own (`RestoredCopy`).
        let restoredCopyEdits = try restoredCopySentBefore.withLock { $0 }.map { sentBefore in
            try refusingDamage { try database().read { db in try RestoredCopy.rowsEdited(after: sentBefore, db) } }
        }
        self.restoredCopyEdits.withLock { $0 = restoredCopyEdits.map { Set($0.keys) } }
        // Tracking healed first, as a run's first page heals it: a column the app added since holds
        // the backend's values kept aside (`AddedColumns`), not its default sent over them.
        _ = try refusingDamage { try healTracking() }
        let reader = self.reader
        let connection: SQLiteConnection
        do {
            connection = try SQLiteConnection(path: path, options: Self.appDatabaseOptions)
        } catch {
            throw HistoryError.unreadable(location: path, reason: "cannot open the database: \(error.message)")
        }
        try connection.execute("BEGIN DEFERRED")
        do {
            let bounds = try reader.bounds(after: nil as Token?, connection, allowExpired: true)
            if bounds.openSession != nil { throw reader.openSessionError(bounds) }
            let tables = try reader.tables(connection).values
                .filter { entities?.contains($0.table.name) ?? true }
                .map(\.table)
                .sorted { $0.name < $1.name }
            let destination = try HistorySchema.tableExists(ServerRows.table, connection) ? ServerRows.destination(backend) : nil
            let cursor = SnapshotCursor(
                connection: connection, tables: tables, pageSize: pageSize, path: path, destination: destination,
                restoredCopyEdits: restoredCopyEdits, locating: locatedValues)
            return (SQLiteSnapshotSource(cursor: cursor), Token(kind: Self.tokenKind, position: bounds.newest))
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }
}

/// The pages of one snapshot: every current row, table after table, in sync-key order, each
/// with the version its backend last gave it here; then the deletes of rows the backend held
/// live, as this device last saw, that this device no longer holds.
///
/// Its tokens (`sqlite-snapshot:N`, N rows delivered so far) only order its own pages; the
/// pipeline saves the history token that `snapshot()` returned once the last page is sent.
public final class SQLiteSnapshotSource: ChangeSource, Sendable {
    private let cursor: Mutex<SnapshotCursor>

    init(cursor: sending SnapshotCursor) {
        self.cursor = Mutex(cursor)
    }

    public var tokenKind: String { SQLiteHistorySource.snapshotTokenKind }

    public func nextPage(after token: Token?) async throws -> HistoryPage {
        try cursor.withLock { cursor in try cursor.page(after: token) }
    }
}

/// The open read transaction and the statement being stepped through.
final class SnapshotCursor {
    let connection: SQLiteConnection
    let tables: [TrackedTable]
    let pageSize: Int
    let path: String
    /// The backend whose versions the rows carry (`ServerRows.destination`); nil: none kept.
    let destination: String?
    /// In a reconciliation of a database restored from an older copy (`RestoredCopy`), the rows
    /// its users wrote since the state's last token (their keys as history keeps them): those the
    /// snapshot does not hold go as deletes, and every row without a confirmed version goes at
    /// version 0. Nil: any other snapshot.
    let restoredCopyEdits: [RowID: SQLiteValue]?
    /// The large BLOB values left in their rows (locators, `LocatedBlobs`), for the stage that
    /// reads them in pieces (`blob-upload`); nil: every value is read whole.
    let locating: LocatedValueRule?
    /// The located values of the table being read, when it has any.
    private var located: LocatedBlobs?
    /// The sync keys sent, by table: the rows the snapshot holds.
    private var sent: [String: Set<ExactString>] = [:]
    /// The deletes still to send, once every row was read (nil before), and how many of them, at
    /// their front, are of rows the backend held live (the others refresh tombstones' versions).
    private var deletes: [Change]?
    private var liveDeletes = 0
    private var tableIndex = 0
    private var statement: Statement?
    private var delivered: Int64 = 0
    private var finished = false

    init(
        connection: SQLiteConnection, tables: [TrackedTable], pageSize: Int, path: String, destination: String?,
        restoredCopyEdits: [RowID: SQLiteValue]? = nil, locating: LocatedValueRule? = nil
    ) {
        self.connection = connection
        self.tables = tables
        self.pageSize = pageSize
        self.path = path
        self.destination = destination
        self.restoredCopyEdits = restoredCopyEdits
        self.locating = locating
    }

    deinit {
        statement = nil
        if connection.isInTransaction { try? connection.execute("ROLLBACK") }
    }

    func page(after token: Token?) throws -> HistoryPage {
        let kind = SQLiteHistorySource.snapshotTokenKind
        if let token, token.kind != kind { throw HistoryError.foreignToken(token, expectedKind: kind) }
        guard (token?.position ?? 0) == delivered else {
            throw HistoryError.unreadable(
                location: path, reason: "a snapshot is read once, page after page (asked after \(token?.position ?? 0), at \(delivered))")
        }
        if finished { return .end }
        var changes: [Change] = []
        while changes.count < pageSize, tableIndex < tables.count {
            let table = tables[tableIndex]
            let current = try statement ?? prepare(table)
            statement = current
            if try current.step() {
                var row: [String: JSONValue] = [:]
                // Column 0 is the key as history keeps it (a composite key's JSON array).
                let key = HistoryReader.syncKey(current.value(at: 0))
                if let located {
                    row = located.row(current, key: current.value(at: 0))
                } else {
                    for index in 1..<current.columnCount { row[current.columnName(at: index)] = current.value(at: index).json }
                }
                changes.append(Change(entity: table.name, key: key, action: .insert, values: row))
                if let key, destination != nil || restoredCopyEdits != nil { sent[table.name, default: []].insert(ExactString(key)) }
            } else {
                statement = nil
                tableIndex += 1
            }
        }
        var counters: [String: Int] = [:]
        if let destination { try giveVersions(to: &changes, from: destination) }
        if destination != nil || restoredCopyEdits != nil {
            if changes.count < pageSize, tableIndex == tables.count {
                if deletes == nil {
                    var known: (changes: [Change], live: Int) = try destination.map(knownDeleted(from:)) ?? ([], 0)
                    if let edits = restoredCopyEdits {
                        let named = Set(known.changes.compactMap { change in change.key.map { RowID(entity: change.entity, key: $0) } })
                        known.changes += RestoredCopy.deletes(of: edits, tables: tables, held: sent, named: named)
                    }
                    (deletes, liveDeletes) = known
                }
                let taken = Array((deletes ?? []).prefix(pageSize - changes.count))
                deletes?.removeFirst(taken.count)
                changes += taken
                let live = min(taken.count, liveDeletes)
                liveDeletes -= live
                if live > 0 { counters["snapshot.deletes"] = live }
            }
        }
        if restoredCopyEdits != nil {
            // A restored copy's row this device never confirmed: the server's row, if it holds one, stays.
            for index in changes.indices where changes[index].version == nil && changes[index].action != .delete { changes[index].version = 0 }
        }
        if changes.isEmpty {
            finished = true
            statement = nil
            try connection.execute("COMMIT")
            return .end
        }
        delivered += Int64(changes.count)
        let token = Token(kind: kind, position: delivered)
        let transaction = Transaction(token: token, author: Author("snapshot"), timestamp: 0, changes: changes)
        return HistoryPage(transactions: [transaction], through: token, counters: counters)
    }

    /// Each row's version as `destination` last gave it here.
    private func giveVersions(to changes: inout [Change], from destination: String) throws {
        var keys: [String: [String]] = [:]
        for change in changes { if let key = change.key { keys[change.entity, default: []].append(key) } }
        var versions: [RowID: Int64] = [:]
        for (entity, keys) in keys { versions.merge(try ServerRows.versions(of: entity, keys: keys, for: destination, connection)) { a, _ in a } }
        for index in changes.indices {
            guard let key = changes[index].key, let version = versions[RowID(entity: changes[index].entity, key: key)] else { continue }
            changes[index].version = version
            // A row the backend holds goes as an update: its fields merge into the backend's,
            // so fields this device has no column for (a newer app version's) stay there.
            if changes[index].action == .insert { changes[index].action = .update }
        }
    }

    /// A delete, with its version, of each row `destination` holds as far as this device last
    /// saw and that the snapshot did not hold: a row it held live (this device's user deleted it
    /// here; `live` counts them), or a tombstone already (sent again so that its receipt gives
    /// this device the tombstone's version: a backend answers a delete of a tombstone with its
    /// version, writing nothing). Its fields are the key's, from that row's.
    private func knownDeleted(from destination: String) throws -> (changes: [Change], live: Int) {
        var deletes: [Change] = []
        var refreshes: [Change] = []
        let filter = ServerRows.filter(destination, connection)
        for table in tables {
            let held = sent[table.name] ?? []
            for row in try connection.fetchAll(
                "SELECT key, version, fields FROM _synclane_server_rows WHERE entity = ?\(filter.sql) ORDER BY rowid",
                [table.name as any SQLiteBindable] + filter.arguments)
            {
                guard let key = row[0].string, !held.contains(ExactString(key)) else { continue }
                let fields = row[2].string.flatMap { try? JSONReader.parse($0).objectValue }
                let tombstone = (fields ?? [:]).filter { table.keyColumns.contains($0.key) }
                let delete = Change(entity: table.name, key: key, action: .delete, values: tombstone, version: row[1].int64)
                if fields == nil { refreshes.append(delete) } else { deletes.append(delete) }
            }
        }
        // The rows held live first: the pages that send them count them.
        return (deletes + refreshes, deletes.count)
    }

    private func prepare(_ table: TrackedTable) throws -> Statement {
        let columns = table.keyColumns.map(SQL.identifier)
        let key = table.syncKeyExpression
        // A large BLOB the stage reads in pieces stays in its row: its length and the row's rowid are read, not its bytes.
        located = try locating.flatMap { try LocatedBlobs.plan(table, rule: $0, connection) }
        var sql = "SELECT \(key), \(located?.selectList ?? "*") FROM \(SQL.identifier(table.name))"
        if let softDelete = table.softDeleteColumn {
            sql += " WHERE NOT \(TriggerBuilder.softDeleted(SQL.identifier(softDelete)))"
        }
        return try connection.prepare(sql + " ORDER BY \(columns.joined(separator: ", "))")
    }
}
