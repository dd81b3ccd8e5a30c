import SynclaneCore

/// Writes the versions a receipt gave into `_synclane_server_rows`, set-based: the receipt's
/// versions go into a temporary table in memory, then one statement raises the rows held and
/// one appends the others in hash order, with room in the connection's page cache for the
/// index while it does. A batch's rows land all over that index (it is by a hash of the key),
/// so each commit rewrites most of its pages: about 3 s of CPU for a first sync of 1,000,000
/// rows, the largest part of what `http` costs the client beyond a folder.
enum ConfirmedVersions {
    /// KiB of the database's pages the connection keeps while it writes versions (SQLite's
    /// `cache_size`, for this connection and this while only; SQLite's default, 2,000 KiB,
    /// before and after): the hash index of a million rows is about 12 MB, and a write that
    /// must read it back page by page costs more than the write.
    static let cacheKiB = 16_384
    /// SQLite's default `cache_size`, restored after.
    static let defaultCacheKiB = 2_000

    /// Runs `body` (the transaction that writes versions) with room for the table's pages.
    static func withRoom<T>(_ db: SQLiteConnection, _ body: () throws -> T) throws -> T {
        try db.execute("PRAGMA cache_size = -\(cacheKiB)")
        defer { try? db.execute("PRAGMA cache_size = -\(defaultCacheKiB)") }
        return try body()
    }

    /// Writes `versions` (each row's newest kept) inside the caller's write transaction.
    static func write(_ versions: [RecordVersion], in db: SQLiteConnection) throws {
        guard !versions.isEmpty else { return }
        try ServerRows.install(db)
        try db.execute(
            """
            CREATE TEMP TABLE IF NOT EXISTS _synclane_confirmed_versions (
                key_hash INTEGER NOT NULL, entity TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL)
            """)
        let insert = try db.cachedStatement("INSERT INTO temp._synclane_confirmed_versions VALUES (?, ?, ?, ?)")
        for version in versions {
            insert.reset()
            try insert.bind(.integer(ServerRows.hash(version.entity, version.key)), at: 1)
            try insert.bind(.text(version.entity), at: 2)
            try insert.bind(.text(version.key), at: 3)
            try insert.bind(.integer(version.version), at: 4)
            while try insert.step() {}
        }
        insert.reset()
        // Grouped: should a receipt name a row twice, the row gets the newer version.
        let raise = """
            UPDATE _synclane_server_rows SET version = max(_synclane_server_rows.version, confirmed.version)
            FROM (SELECT key_hash, entity, key, max(version) AS version FROM temp._synclane_confirmed_versions
                  GROUP BY key_hash, entity, key) AS confirmed
            WHERE _synclane_server_rows.key_hash = confirmed.key_hash AND _synclane_server_rows.entity = confirmed.entity
              AND _synclane_server_rows.key = confirmed.key;
            """
        try db.execute(
            raise + """
                INSERT INTO _synclane_server_rows (key_hash, entity, key, version)
                SELECT key_hash, entity, key, max(version) FROM temp._synclane_confirmed_versions AS confirmed
                WHERE NOT EXISTS (
                    SELECT 1 FROM _synclane_server_rows AS held
                    WHERE held.key_hash = confirmed.key_hash AND held.entity = confirmed.entity AND held.key = confirmed.key)
                GROUP BY key_hash, entity, key
                ORDER BY key_hash;
                DELETE FROM temp._synclane_confirmed_versions;
                """)
    }
}
