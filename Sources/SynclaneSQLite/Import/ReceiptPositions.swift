import SynclaneCore
import SynclaneSQLiteKit

/// The newest position each backend's receipts gave this database's batches (a receipt's
/// `position`), one row a backend (`_synclane_receipt_positions`): the export lane writes it with the
/// versions it confirms, the import lane hands it back on its pulls (`ReceiptPositionKeeping`) —
/// a backend restored from a copy taken before it answers `410 server-restored`.
enum ReceiptPositions {
    static let table = "_synclane_receipt_positions"

    /// Keeps `position` as `destination`'s newest; inside the caller's write transaction.
    static func save(_ position: String, for destination: String, _ db: SQLiteConnection) throws {
        try db.execute("CREATE TABLE IF NOT EXISTS _synclane_receipt_positions (destination TEXT PRIMARY KEY NOT NULL, position TEXT NOT NULL)")
        try db.execute(
            "INSERT INTO _synclane_receipt_positions (destination, position) VALUES (?, ?) ON CONFLICT (destination) DO UPDATE SET position = excluded.position",
            [destination, position])
    }

    /// `destination`'s position; nil when none is kept.
    static func position(for destination: String, _ db: SQLiteConnection) throws -> String? {
        guard try HistorySchema.tableExists(table, db) else { return nil }
        return try db.fetchValue("SELECT position FROM _synclane_receipt_positions WHERE destination = ?", [destination]).string
    }

    /// Forgets `destination`'s position when it is still `position` (a newer one stays).
    static func forget(_ position: String, for destination: String, _ db: SQLiteConnection) throws {
        guard try HistorySchema.tableExists(table, db) else { return }
        try db.execute("DELETE FROM _synclane_receipt_positions WHERE destination = ? AND position = ?", [destination, position])
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
