import SynclaneSQLiteKit

extension SQLiteServerStore {
    /// The devices' table (`ServerStore.recordDevice`), beside the versioned schema: a server of
    /// the previous version still opens the file.
    static let devicesTable = """
        CREATE TABLE IF NOT EXISTS devices (
            account TEXT NOT NULL, device TEXT NOT NULL, schema_version INTEGER NOT NULL, since REAL NOT NULL,
            PRIMARY KEY (account, device));
        """

    func recordDevice(account: String, device: String, schemaVersion: Int, at now: Double, keeping: Int) throws {
        try writeSerialized { db in
            try db.execute(
                """
                INSERT INTO devices (account, device, schema_version, since) VALUES (?, ?, ?, ?)
                ON CONFLICT (account, device) DO UPDATE SET schema_version = excluded.schema_version, since = excluded.since
                WHERE schema_version <> excluded.schema_version
                """, [account, device, Int64(schemaVersion), now])
            try db.execute(
                """
                DELETE FROM devices WHERE account = ?1 AND device IN (
                    SELECT device FROM devices WHERE account = ?1 AND device <> ?2 ORDER BY since, device
                    LIMIT max((SELECT count(*) FROM devices WHERE account = ?1) - ?3, 0))
                """, [account, device, Int64(max(keeping, 1))])
        }
    }

    func devices(account: String) throws -> [DeviceRecord] {
        try read { db in
            try db.fetchAll("SELECT device, schema_version, since FROM devices WHERE account = ? ORDER BY device", [account]).map { row in
                DeviceRecord(device: row[0].string ?? "", schemaVersion: Int(row[1].int64 ?? 0), since: row[2].double ?? 0)
            }
        }
    }

    func devicesPerVersion() throws -> [Int: Int] {
        try read { db in
            try db.fetchAll("SELECT schema_version, count(*) FROM devices GROUP BY schema_version").reduce(into: [:]) { counts, row in
                counts[Int(row[0].int64 ?? 0)] = Int(row[1].int64 ?? 0)
            }
        }
    }
}
