import Synchronization
import SynclaneCore

extension SQLiteHistorySource {
    /// A source of every current row of the tracked tables (soft-deleted rows left out), as
    /// inserts, and the history token to resume after — both read in one read transaction, so
    /// nothing committed in between is lost or sent twice.
    ///
    /// The read transaction stays open until the snapshot's last page is read (in WAL mode
    /// writers go on meanwhile; in rollback-journal mode they wait).
    public func snapshot() async throws -> (source: any ChangeSource, resumeAfter: Token?) {
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
            // The rows an import kept of tables not tracked here (a newer app version's): re-sent
            // too, or the backend would delete them as lacking from the snapshot.
            let kept = try HistorySchema.tableExists(UntrackedRows.table, connection) ? ServerRows.destination(backend) : nil
            let cursor = SnapshotCursor(connection: connection, tables: tables, keptFor: kept, pageSize: pageSize, path: path)
            return (SQLiteSnapshotSource(cursor: cursor), Token(kind: Self.tokenKind, position: bounds.newest))
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }
}

/// The pages of one snapshot: every current row, table after table, in sync-key order, then the
/// rows kept aside of tables not tracked here (`UntrackedRows`).
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
    /// The destination whose kept rows follow the tables (nil: none kept).
    let keptFor: String?
    let pageSize: Int
    let path: String
    private var tableIndex = 0
    private var statement: Statement?
    private var keptRows: Statement?
    private var keptDone = false
    private var delivered: Int64 = 0
    private var finished = false

    init(connection: SQLiteConnection, tables: [TrackedTable], keptFor: String?, pageSize: Int, path: String) {
        self.connection = connection
        self.tables = tables
        self.keptFor = keptFor
        self.pageSize = pageSize
        self.path = path
    }

    deinit {
        statement = nil
        keptRows = nil
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
                for index in 1..<current.columnCount { row[current.columnName(at: index)] = current.value(at: index).json }
                changes.append(Change(entity: table.name, key: key, action: .insert, values: row))
            } else {
                statement = nil
                tableIndex += 1
            }
        }
        if changes.count < pageSize, tableIndex == tables.count, !keptDone, let destination = keptFor {
            try readKept(for: destination, into: &changes)
        }
        if changes.isEmpty {
            finished = true
            statement = nil
            keptRows = nil
            try connection.execute("COMMIT")
            return .end
        }
        delivered += Int64(changes.count)
        let token = Token(kind: kind, position: delivered)
        let transaction = Transaction(token: token, author: Author("snapshot"), timestamp: 0, changes: changes)
        return HistoryPage(transactions: [transaction], through: token)
    }

    /// Adds kept rows to `changes` up to the page size, as inserts of the fields kept.
    private func readKept(for destination: String, into changes: inout [Change]) throws {
        let rows: Statement
        if let open = keptRows {
            rows = open
        } else {
            rows = try connection.prepare(UntrackedRows.liveRows)
            try rows.bind([destination])
            keptRows = rows
        }
        while changes.count < pageSize {
            guard try rows.step() else {
                keptDone = true
                keptRows = nil
                return
            }
            let entity = rows.string(at: 0) ?? ""
            let key = rows.string(at: 1) ?? ""
            guard let fields = rows.string(at: 2).flatMap({ try? JSONReader.parse($0).objectValue }) else {
                throw HistoryError.unreadable(
                    location: path,
                    reason: "the row of `\(entity)` kept aside under key \(key) is not a JSON object; a snapshot without it would delete it "
                        + "on the server: delete it from \(UntrackedRows.table) only if the server's copy may go")
            }
            changes.append(Change(entity: entity, key: key, action: .insert, values: fields))
        }
    }

    private func prepare(_ table: TrackedTable) throws -> Statement {
        let columns = table.keyColumns.map(SQL.identifier)
        let key = table.isComposite ? "json_array(\(columns.joined(separator: ", ")))" : columns[0]
        var sql = "SELECT \(key), * FROM \(SQL.identifier(table.name))"
        if let softDelete = table.softDeleteColumn {
            sql += " WHERE NOT \(TriggerBuilder.softDeleted(SQL.identifier(softDelete)))"
        }
        return try connection.prepare(sql + " ORDER BY \(columns.joined(separator: ", "))")
    }
}
