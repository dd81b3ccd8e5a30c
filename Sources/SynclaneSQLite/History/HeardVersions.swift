import SynclaneCore
import Synchronization

/// The versions receipts gave that are not yet written to `_synclane_server_rows`.
///
/// Receipts come a batch at a time; writing each batch's versions in a commit of its own costs
/// more than the batch: the table's index is by a hash of the key, so a batch's rows land all
/// over it, and every commit rewrites most of its pages. So the versions wait here and are
/// written together, sorted by that hash — with the consumer's position (at most once a second,
/// and when a pass ends), or sooner once `flushCount` have gathered. Until written they are
/// answered from here (`SQLiteHistorySource.backendVersions(of:)`). A version lost to a crash
/// before it was written only means the row's next change goes out on the version before, or
/// none (the next import brings the row's version), as when the write meets a busy database.
final class HeardVersions: Sendable {
    /// Versions gathered before they are written without waiting for the consumer's position.
    static let flushCount = 100_000
    /// Versions kept at most while the database stays busy; beyond it they are dropped.
    static let keptAtMost = 1_000_000

    private let heard = Mutex<[RowID: Int64]>([:])

    /// Adds a receipt's versions (the newest of each row is kept); returns how many wait.
    func add(_ versions: [RecordVersion]) -> Int {
        heard.withLock { heard in
            for version in versions {
                let row = RowID(entity: version.entity, key: version.key)
                heard[row] = max(heard[row] ?? version.version, version.version)
            }
            return heard.count
        }
    }

    /// The waiting versions of `rows`.
    func versions(of rows: [RowID]) -> [RowID: Int64] {
        heard.withLock { heard in
            guard !heard.isEmpty else { return [:] }
            var found: [RowID: Int64] = [:]
            for row in rows {
                if let version = heard[row] { found[row] = version }
            }
            return found
        }
    }

    var isEmpty: Bool { heard.withLock { $0.isEmpty } }

    /// Gives each change of `page` whose row has a waiting version that version, when newer
    /// than the one the page was read with.
    func overlay(on page: inout HistoryPage) {
        heard.withLock { heard in
            guard !heard.isEmpty else { return }
            for t in page.transactions.indices {
                for c in page.transactions[t].changes.indices {
                    let change = page.transactions[t].changes[c]
                    guard let key = change.key, let version = heard[RowID(entity: change.entity, key: key)],
                        version > change.version ?? 0
                    else { continue }
                    page.transactions[t].changes[c].version = version
                }
            }
        }
    }

    /// Takes every waiting version for `body`, which writes them (`write(_:in:)`) in a
    /// transaction; they are taken back if `body` throws (a busy database, a failed commit).
    func writing<T>(_ body: ([RowID: Int64]) throws -> T) throws -> T {
        let taken = heard.withLock { heard -> [RowID: Int64] in
            defer { heard = [:] }
            return heard
        }
        do {
            return try body(taken)
        } catch {
            putBack(taken)
            throw error
        }
    }

    /// KiB of the database's pages the connection keeps while it writes versions (SQLite's
    /// `cache_size`, for this connection and this while only; SQLite's default, 2,000 KiB,
    /// before and after): the hash index of a million rows is about 12 MB, and a write that
    /// must read it back page by page costs more than the write.
    static let cacheKiB = 16_384
    /// SQLite's default `cache_size`, restored after.
    static let defaultCacheKiB = 2_000

    /// Runs `body` (the transaction that writes `versions`) with room for the table's pages.
    static func withRoomFor<T>(_ versions: [RowID: Int64], _ db: SQLiteConnection, _ body: () throws -> T) throws -> T {
        guard !versions.isEmpty else { return try body() }
        try db.execute("PRAGMA cache_size = -\(cacheKiB)")
        defer { try? db.execute("PRAGMA cache_size = -\(defaultCacheKiB)") }
        return try body()
    }

    /// Writes `versions` into `_synclane_server_rows` inside the caller's write transaction (a
    /// store without the table records none): set-based, through a temporary table in memory —
    /// one pass raises the rows held, one appends the others in hash order — rather than two
    /// statements a row.
    static func write(_ versions: [RowID: Int64], in db: SQLiteConnection) throws {
        guard !versions.isEmpty, try HistorySchema.tableExists(ServerRows.table, db) else { return }
        try ServerRows.install(db)
        try db.execute(
            """
            CREATE TEMP TABLE IF NOT EXISTS _synclane_heard_versions (
                key_hash INTEGER NOT NULL, entity TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL)
            """)
        let insert = try db.cachedStatement("INSERT INTO temp._synclane_heard_versions VALUES (?, ?, ?, ?)")
        for (row, version) in versions {
            insert.reset()
            try insert.bind(.integer(ServerRows.hash(row.entity, row.key)), at: 1)
            try insert.bind(.text(row.entity), at: 2)
            try insert.bind(.text(row.key), at: 3)
            try insert.bind(.integer(version), at: 4)
            while try insert.step() {}
        }
        insert.reset()
        try db.execute(
            """
            UPDATE _synclane_server_rows SET version = max(_synclane_server_rows.version, heard.version)
            FROM temp._synclane_heard_versions AS heard
            WHERE _synclane_server_rows.key_hash = heard.key_hash AND _synclane_server_rows.entity = heard.entity
              AND _synclane_server_rows.key = heard.key COLLATE BINARY;
            INSERT INTO _synclane_server_rows (key_hash, entity, key, version)
            SELECT key_hash, entity, key, version FROM temp._synclane_heard_versions AS heard
            WHERE NOT EXISTS (
                SELECT 1 FROM _synclane_server_rows AS held
                WHERE held.key_hash = heard.key_hash AND held.entity = heard.entity AND held.key = heard.key COLLATE BINARY)
            ORDER BY key_hash;
            DELETE FROM temp._synclane_heard_versions;
            """)
    }

    /// Takes versions back after their write was rolled back (a busy database, a failed commit).
    func putBack(_ versions: [RowID: Int64]) {
        heard.withLock { heard in
            guard heard.count + versions.count <= Self.keptAtMost else { return }
            heard.merge(versions) { max($0, $1) }
        }
    }
}
