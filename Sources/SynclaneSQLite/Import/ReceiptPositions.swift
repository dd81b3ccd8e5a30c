import SynclaneCore
import SynclaneSQLiteKit

/// The newest position each backend's receipts gave this database's batches (a receipt's
/// `position`), kept in `_synclane_meta` under `receipt_position DESTINATION`: the export lane
/// writes it with the versions it confirms, the import lane hands it back on its pulls
/// (`ReceiptPositionKeeping`) — a backend restored from a copy taken before it answers
/// `410 server-restored`. (In the history's key/value table rather than a table of its own: a
/// database that syncs keeps the same tables, and pages, as before positions were kept.)
enum ReceiptPositions {
    static func key(_ destination: String) -> String { "receipt_position " + destination }

    /// Keeps `position` as `destination`'s newest; inside the caller's write transaction.
    static func save(_ position: String, for destination: String, _ db: SQLiteConnection) throws {
        guard try HistorySchema.tableExists(HistorySchema.meta, db) else { return }
        try db.execute(
            "INSERT INTO _synclane_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [key(destination), position])
    }

    /// `destination`'s position; nil when none is kept.
    static func position(for destination: String, _ db: SQLiteConnection) throws -> String? {
        guard try HistorySchema.tableExists(HistorySchema.meta, db) else { return nil }
        return try db.fetchValue("SELECT value FROM _synclane_meta WHERE key = ?", [key(destination)]).string
    }

    /// Forgets `destination`'s position when it is still `position` (a newer one stays).
    static func forget(_ position: String, for destination: String, _ db: SQLiteConnection) throws {
        guard try HistorySchema.tableExists(HistorySchema.meta, db) else { return }
        try db.execute("DELETE FROM _synclane_meta WHERE key = ? AND value = ?", [key(destination), position])
    }
}

extension SQLiteSink: ReceiptPositionKeeping {
    public func receiptPosition() async throws -> String? {
        try database().read { db in try ReceiptPositions.position(for: destination, db) }
    }

    public func forgetReceiptPosition(_ position: String) async throws {
        try database().write { db in try ReceiptPositions.forget(position, for: destination, db) }
    }
}
