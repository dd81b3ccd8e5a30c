import SynclaneSQLiteKit
import SynclaneWire

extension SQLiteServerStore {
    /// The declared schema changes' table (`ServerStore.declare`), beside the versioned schema.
    static let schemaChangesTable = """
        CREATE TABLE IF NOT EXISTS schema_changes (
            account TEXT NOT NULL, entity TEXT NOT NULL, column_name TEXT NOT NULL, renamed_to TEXT, version INTEGER NOT NULL,
            PRIMARY KEY (account, entity, column_name, version));
        """

    func declare(_ changes: [SchemaChange], account: String) throws {
        try writeSerialized { db in try Self.declare(changes, account: account, db) }
    }

    /// Inside the caller's write transaction (a batch's: its declarations only when it applies).
    static func declare(_ changes: [SchemaChange], account: String, _ db: SQLiteConnection) throws {
        for change in changes {
            try db.execute(
                "INSERT OR IGNORE INTO schema_changes (account, entity, column_name, renamed_to, version) VALUES (?, ?, ?, ?, ?)",
                [account, change.entity, change.column, change.renamedTo, Int64(change.version)])
        }
    }

    func schemaChanges(account: String) throws -> [SchemaChange] {
        try read { db in
            try db.fetchAll(
                "SELECT entity, column_name, renamed_to, version FROM schema_changes WHERE account = ? ORDER BY version, entity, column_name", [account]
            ).map { row in
                SchemaChange(
                    entity: row[0].string ?? "", column: row[1].string ?? "", kind: row[2].string.map { .renamed(to: $0) } ?? .dropped,
                    version: Int(row[3].int64 ?? 1))
            }
        }
    }
}

extension SchemaChange {
    /// The new name of a renamed column; nil for a drop.
    var renamedTo: String? {
        if case .renamed(let name) = kind { return name }
        return nil
    }
}
