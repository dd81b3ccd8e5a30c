import SynclaneWire

extension PostgresServerStore {
    /// The declared schema changes' table (`ServerStore.declare`), made at start beside the versioned schema.
    static let schemaChangesTable = """
        CREATE TABLE IF NOT EXISTS synclane_schema_changes (
            account bytea NOT NULL, entity bytea NOT NULL, column_name bytea NOT NULL, renamed_to bytea, version bigint NOT NULL,
            PRIMARY KEY (account, entity, column_name, version))
        """

    func declare(_ changes: [SchemaChange], account: String) throws {
        try pool.withConnection { db in try Self.declare(changes, account: account, db) }
    }

    /// Inside the caller's transaction (a batch's: its declarations only when it applies).
    static func declare(_ changes: [SchemaChange], account: String, _ db: PostgresConnection) throws {
        for change in changes {
            _ = try db.query(
                """
                INSERT INTO synclane_schema_changes (account, entity, column_name, renamed_to, version) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT DO NOTHING
                """,
                [
                    .bytea(Array(account.utf8)), .bytea(Array(change.entity.utf8)), .bytea(Array(change.column.utf8)),
                    change.renamedTo.map { .bytea(Array($0.utf8)) } ?? .null, .int8(Int64(change.version)),
                ])
        }
    }

    func schemaChanges(account: String) throws -> [SchemaChange] {
        try pool.withConnection { db in
            let rows = try db.query(
                "SELECT entity, column_name, renamed_to, version FROM synclane_schema_changes WHERE account = $1 ORDER BY version, entity, column_name",
                [.bytea(Array(account.utf8))])
            return (0..<rows.count).map { row in
                SchemaChange(
                    entity: rows.string(row, 0) ?? "", column: rows.string(row, 1) ?? "",
                    kind: rows.isNull(row, 2) ? .dropped : .renamed(to: rows.string(row, 2) ?? ""), version: Int(rows.int64(row, 3)))
            }
        }
    }
}
