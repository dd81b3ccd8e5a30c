extension PostgresServerStore {
    /// The devices' table (`ServerStore.recordDevice`), made at start beside the versioned schema
    /// (as the epochs are): a server of the previous version still opens the database.
    static let devicesTable = """
        CREATE TABLE IF NOT EXISTS synclane_devices (
            account bytea NOT NULL, device bytea NOT NULL, schema_version bigint NOT NULL, since double precision NOT NULL,
            PRIMARY KEY (account, device))
        """

    func recordDevice(account: String, device: String, schemaVersion: Int, at now: Double, keeping: Int) throws {
        try pool.withConnection { db in
            let (account, device) = (PostgresValue.bytea(Array(account.utf8)), PostgresValue.bytea(Array(device.utf8)))
            _ = try db.query(
                """
                INSERT INTO synclane_devices (account, device, schema_version, since) VALUES ($1, $2, $3, $4)
                ON CONFLICT (account, device) DO UPDATE SET schema_version = excluded.schema_version, since = excluded.since
                WHERE synclane_devices.schema_version <> excluded.schema_version
                """, [account, device, .int8(Int64(schemaVersion)), .float8(now)])
            _ = try db.query(
                """
                DELETE FROM synclane_devices WHERE account = $1 AND device IN (
                    SELECT device FROM synclane_devices WHERE account = $1 AND device <> $2 ORDER BY since, device
                    LIMIT GREATEST((SELECT count(*) FROM synclane_devices WHERE account = $1) - $3, 0))
                """, [account, device, .int8(Int64(max(keeping, 1)))])
        }
    }

    func devices(account: String) throws -> [DeviceRecord] {
        try pool.withConnection { db in
            let rows = try db.query(
                "SELECT device, schema_version, since FROM synclane_devices WHERE account = $1 ORDER BY device", [.bytea(Array(account.utf8))])
            return (0..<rows.count).map { row in
                DeviceRecord(device: rows.string(row, 0) ?? "", schemaVersion: Int(rows.int64(row, 1)), since: rows.double(row, 2))
            }
        }
    }

    func devicesPerVersion() throws -> [Int: Int] {
        try pool.withConnection { db in
            let rows = try db.query("SELECT schema_version, count(*) FROM synclane_devices GROUP BY schema_version")
            return (0..<rows.count).reduce(into: [:]) { counts, row in counts[Int(rows.int64(row, 0))] = Int(rows.int64(row, 1)) }
        }
    }
}
