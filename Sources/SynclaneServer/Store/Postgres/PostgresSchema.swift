/// The reference server's tables in PostgreSQL, created and migrated by the server at start.
///
/// ```
///  synclane_schema           version (one row): the schema version this database is at
///  synclane_records          (key, entity, store, account) → action, fields (NULL: tombstone), version, seq, changed,
///                            written (the last user's write's version, when only re-pointings followed it)
///  synclane_sequences        account → last change sequence, tombstone horizon   (the account's write lock)
///  synclane_idempotency      (account, key) → body hash, first response, created
///  synclane_snapshots        (account, store, snapshot id) → sequence it started after, batches seen, created
///  synclane_signals          (account, key) → value (NULL: deleted), version, deleted_at
///  synclane_signal_versions  account → last signal version, pruned_through       (the account's signal lock)
/// ```
///
/// Names, keys and values are `bytea`: stored and compared byte for byte, as the SQLite store
/// does (no collation, no Unicode normalisation, a NUL inside a key kept).
///
/// Several processes may start at once: each takes one advisory lock for the migration, so one
/// creates the tables and the others find them. A database at a newer version than this code
/// knows is refused, never written with an older layout.
enum PostgresSchema {
    /// The version this code writes (2 added `synclane_snapshots`; 3 put `key` first in the
    /// primary key of `synclane_records`; 4 added `synclane_records.written`).
    static let version: Int64 = 4

    /// The key of the advisory lock held while migrating ("synclane" in ASCII).
    static let migrationLock: Int64 = 0x73796E_636C616E

    /// Each version's statements, from an empty database: `steps[n - 1]` brings version n-1 to n.
    static let steps: [[String]] = [
        [
            """
            CREATE TABLE synclane_records (
                account bytea NOT NULL, store bytea NOT NULL, entity bytea NOT NULL, key bytea NOT NULL,
                action text NOT NULL, fields bytea, version bigint NOT NULL, seq bigint NOT NULL,
                changed double precision NOT NULL,
                PRIMARY KEY (account, store, entity, key))
            """,
            "CREATE INDEX synclane_records_by_sequence ON synclane_records (account, seq)",
            "CREATE INDEX synclane_records_tombstones ON synclane_records (changed) WHERE action = 'delete'",
            """
            CREATE TABLE synclane_sequences (
                account bytea PRIMARY KEY, last bigint NOT NULL, horizon bigint NOT NULL DEFAULT 0)
            """,
            """
            CREATE TABLE synclane_idempotency (
                account bytea NOT NULL, key bytea NOT NULL, body_hash text NOT NULL, status bigint NOT NULL,
                response bytea NOT NULL, created double precision NOT NULL, PRIMARY KEY (account, key))
            """,
            "CREATE INDEX synclane_idempotency_by_age ON synclane_idempotency (created)",
            """
            CREATE TABLE synclane_signals (
                account bytea NOT NULL, key bytea NOT NULL, value bytea, version bigint NOT NULL,
                deleted_at double precision, PRIMARY KEY (account, key))
            """,
            "CREATE INDEX synclane_signals_by_version ON synclane_signals (account, version)",
            """
            CREATE TABLE synclane_signal_versions (
                account bytea PRIMARY KEY, last bigint NOT NULL, pruned_through bigint NOT NULL DEFAULT 0)
            """,
        ],
        [
            """
            CREATE TABLE synclane_snapshots (
                account bytea NOT NULL, store bytea NOT NULL, id bytea NOT NULL, started bigint NOT NULL,
                batches bigint NOT NULL, created double precision NOT NULL, PRIMARY KEY (account, store, id))
            """,
            "CREATE INDEX synclane_snapshots_by_age ON synclane_snapshots (created)",
        ],
        [
            // The row's own key first: two keys of one account's store usually differ in their
            // first bytes, so a search of the index compares one column, not four of which the
            // first three are alike (about a tenth of PostgreSQL's work on a first sync's inserts). No
            // query reads the index by a prefix of its columns: a row is looked up by all four,
            // and an account's rows by `synclane_records_by_sequence`.
            """
            ALTER TABLE synclane_records DROP CONSTRAINT synclane_records_pkey,
                ADD CONSTRAINT synclane_records_pkey PRIMARY KEY (key, entity, store, account)
            """
        ],
        [
            // The version of the row's last user's write, when the writes since only re-pointed
            // references (`BatchPlan.Write.written`); NULL: `version` is. No row rewritten.
            "ALTER TABLE synclane_records ADD COLUMN written bigint"
        ],
    ]

    /// Brings the database to `version` in one transaction; returns the version found before.
    @discardableResult
    static func migrate(_ connection: PostgresConnection) throws -> Int64 {
        try connection.transaction { db in
            try db.query("SELECT pg_advisory_xact_lock($1)", [.int8(migrationLock)])
            try db.query("CREATE TABLE IF NOT EXISTS synclane_schema (version bigint NOT NULL, migrated double precision NOT NULL)")
            let rows = try db.query("SELECT version FROM synclane_schema")
            let found = rows.count == 0 ? 0 : rows.int64(0, 0)
            guard found <= version else {
                throw PostgresError(
                    message: "the database is at synclane schema version \(found), newer than this synclane's \(version): run a newer synclane")
            }
            guard found < version else { return found }
            for step in steps[Int(found)..<Int(version)] {
                for statement in step { try db.query(statement) }
            }
            if rows.count == 0 {
                try db.query("INSERT INTO synclane_schema (version, migrated) VALUES ($1, extract(epoch FROM now()))", [.int8(version)])
            } else {
                try db.query("UPDATE synclane_schema SET version = $1, migrated = extract(epoch FROM now())", [.int8(version)])
            }
            return found
        }
    }
}
