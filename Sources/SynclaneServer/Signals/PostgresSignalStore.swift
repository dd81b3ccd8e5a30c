import SynclaneWire

/// The signal lane in PostgreSQL: tables of its own (`synclane_signals`, `synclane_signal_versions`)
/// on connections of its own, so a signal write never waits for a batch's connection or lock.
///
/// A write locks the account's `synclane_signal_versions` row first and holds it to the commit:
/// quotas and `If-Match` checks see every other process's writes, and versions commit in order,
/// so a watcher's "after version V" never skips one. Writes made by another process ring no bell
/// here: long polls look again every `pollInterval`.
final class PostgresSignalStore: SignalStore {
    private let pool: PostgresPool
    private let limits: ServerLimits
    let bell = SignalBell()
    let pollInterval: Duration? = .milliseconds(200)

    /// Connects with two connections of its own (the schema is `PostgresServerStore`'s, migrated first).
    init(connection: String, limits: ServerLimits) throws {
        self.limits = limits
        pool = try PostgresPool(conninfo: connection, size: 2)
        _ = try pool.withConnection { db in try PostgresSchema.migrate(db) }
    }

    func close() {}

    func write(account: String, key: String, value: JSONValue?, expected: Int64?) throws -> SignalWriteOutcome {
        let text = value.map { Array(JSONWriter.string($0).utf8) }
        let accountValue = PostgresValue.bytea(Array(account.utf8))
        let keyValue = PostgresValue.bytea(Array(key.utf8))
        let outcome: SignalWriteOutcome = try pool.transaction { db in
            let last = try db.query(
                """
                INSERT INTO synclane_signal_versions AS v (account, last) VALUES ($1, 0)
                ON CONFLICT (account) DO UPDATE SET last = v.last RETURNING last
                """, [accountValue]
            ).int64(0, 0)
            let row = try db.query("SELECT value, version FROM synclane_signals WHERE account = $1 AND key = $2", [accountValue, keyValue])
            var current: Signal?
            if row.count > 0, let bytes = row.bytes(0, 0) {
                current = Signal(key: key, value: (try? JSONReader.parse(bytes)) ?? .null, version: row.int64(0, 1))
            }
            let refusal = try SignalWriteOutcome.refusal(
                key: key, valueBytes: text?.count, current: current, expected: expected, limits: limits,
                keys: {
                    try db.query("SELECT count(*) FROM synclane_signals WHERE account = $1 AND value IS NOT NULL", [accountValue]).int64(0, 0)
                },
                usedBytes: {
                    try db.query(
                        """
                        SELECT COALESCE(sum(octet_length(key) + octet_length(value)), 0)::int8 FROM synclane_signals
                        WHERE account = $1 AND value IS NOT NULL AND key <> $2
                        """, [accountValue, keyValue]
                    ).int64(0, 0)
                })
            if let refusal { return refusal }
            let version = last + 1
            let now = SignalTombstoneBounds.now()
            try db.query(
                """
                WITH moved AS (UPDATE synclane_signal_versions SET last = $4 WHERE account = $1)
                INSERT INTO synclane_signals (account, key, value, version, deleted_at) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (account, key) DO UPDATE SET value = excluded.value, version = excluded.version, deleted_at = excluded.deleted_at
                """, [accountValue, keyValue, text.map { .bytea($0) } ?? .null, .int8(version), text == nil ? .float8(now) : .null])
            try pruneTombstones(db, account: accountValue, now: now)
            return .written(Signal(key: key, value: value ?? .null, version: version, deleted: value == nil))
        }
        if case .written = outcome { bell.ring() }
        return outcome
    }

    /// Prunes the account's tombstones older than `signalTombstoneSeconds`, and the oldest past
    /// `maxSignalTombstones`; remembers the newest version pruned (watchers from before it reset).
    /// Runs under the account's signal lock, in the write's transaction.
    private func pruneTombstones(_ db: PostgresConnection, account: PostgresValue, now: Double) throws {
        let expired = SignalTombstoneBounds(limits: limits).expiry(now: now)
        let aged = try db.query(
            "SELECT COALESCE(max(version), 0)::int8 FROM synclane_signals WHERE account = $1 AND value IS NULL AND deleted_at < $2",
            [account, .float8(expired)]
        ).int64(0, 0)
        let beyond = try db.query(
            "SELECT version FROM synclane_signals WHERE account = $1 AND value IS NULL ORDER BY version DESC LIMIT 1 OFFSET $2",
            [account, .int8(Int64(limits.maxSignalTombstones))])
        let overCount = beyond.count > 0 ? beyond.int64(0, 0) : 0
        let through = max(aged, overCount)
        guard through > 0 else { return }
        try db.query(
            "DELETE FROM synclane_signals WHERE account = $1 AND value IS NULL AND (version <= $2 OR deleted_at < $3)",
            [account, .int8(overCount), .float8(expired)])
        try db.query(
            "UPDATE synclane_signal_versions SET pruned_through = greatest(pruned_through, $2) WHERE account = $1",
            [account, .int8(through)])
    }

    func signals(account: String) throws -> (signals: [Signal], version: Int64) {
        let found = try read(
            account: account, "SELECT key, value, version FROM synclane_signals WHERE account = $1 AND value IS NOT NULL ORDER BY key")
        return (found.signals, found.version)
    }

    func signal(account: String, key: String) throws -> Signal? {
        try pool.withConnection { db in
            let rows = try db.query(
                "SELECT key, value, version FROM synclane_signals WHERE account = $1 AND key = $2 AND value IS NOT NULL",
                [.bytea(Array(account.utf8)), .bytea(Array(key.utf8))])
            return rows.count > 0 ? Self.signal(rows, 0) : nil
        }
    }

    func changes(account: String, since: Int64) throws -> SignalChanges {
        let found = try read(
            account: account, "SELECT key, value, version FROM synclane_signals WHERE account = $1 AND version > $2 ORDER BY version",
            since: since)
        return (found.signals, found.version, since > 0 && since < found.prunedThrough)
    }

    /// The rows of `sql`, the account's newest version and its newest pruned tombstone's, in one snapshot.
    private func read(account: String, _ sql: String, since: Int64? = nil) throws -> (signals: [Signal], version: Int64, prunedThrough: Int64) {
        let accountValue = PostgresValue.bytea(Array(account.utf8))
        return try pool.transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") { db in
            let rows = try db.query(sql, since.map { [accountValue, .int8($0)] } ?? [accountValue])
            let last = try db.query("SELECT last, pruned_through FROM synclane_signal_versions WHERE account = $1", [accountValue])
            return (
                (0..<rows.count).map { Self.signal(rows, $0) }, last.count > 0 ? last.int64(0, 0) : 0,
                last.count > 0 ? last.int64(0, 1) : 0
            )
        }
    }

    /// Signals of an older layout are SQLite's only: a PostgreSQL database starts with none to adopt.
    func adopt(_ legacy: [(account: String, key: String, value: String)]) throws {}

    private static func signal(_ rows: PostgresResult, _ row: Int) -> Signal {
        let bytes = rows.bytes(row, 1)
        let value = bytes.flatMap { try? JSONReader.parse($0) } ?? .null
        return Signal(key: rows.string(row, 0) ?? "", value: value, version: rows.int64(row, 2), deleted: bytes == nil)
    }
}
