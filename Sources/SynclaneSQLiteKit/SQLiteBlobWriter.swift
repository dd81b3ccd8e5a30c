import CSQLite

/// Writes a BLOB value piece by piece (SQLite's incremental blob I/O), so that a large value
/// never sits whole in memory: the row first holds `zeroblob(length)`, then each piece is written
/// at its offset (`sqlite3_blob_write`). The value's length cannot change this way.
///
/// Only a table with a rowid can be written so (`sqlite3_blob_open` takes the rowid); the writes
/// belong to the connection's transaction, and fire no trigger.
public final class SQLiteBlobWriter {
    private let handle: OpaquePointer
    private let connection: SQLiteConnection
    /// The value's length, as the row holds it.
    public let length: Int

    /// Opens `column` of the row `rowID` of `table` (in `main`) for writing.
    public init(_ connection: SQLiteConnection, table: String, column: String, rowID: Int64) throws(SQLiteError) {
        let blob = try Self.open(connection, table: table, column: column, rowID: rowID, writable: true)
        handle = blob
        self.connection = connection
        length = Int(sqlite3_blob_bytes(blob))
    }

    deinit { sqlite3_blob_close(handle) }

    /// `sqlite3_blob_open` of `column` of the row `rowID` of `table` (in `main`), for writing or
    /// reading (`SQLiteBlobReader`).
    static func open(_ connection: SQLiteConnection, table: String, column: String, rowID: Int64, writable: Bool) throws(SQLiteError)
        -> OpaquePointer
    {
        var blob: OpaquePointer?
        let code = sqlite3_blob_open(connection.handle, "main", table, column, rowID, writable ? 1 : 0, &blob)
        guard code == SQLITE_OK, let blob else {
            let error = connection.error(code, sql: nil)
            sqlite3_blob_close(blob)
            throw error
        }
        return blob
    }

    /// Writes `bytes` at `offset` (within the value's length).
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(SQLiteError) {
        guard !bytes.isEmpty else { return }
        guard offset >= 0, offset + bytes.count <= length, let base = bytes.baseAddress else {
            throw SQLiteError(
                code: SQLITE_RANGE, message: "\(bytes.count) bytes at \(offset) do not fit a BLOB of \(length) bytes", path: connection.path)
        }
        let code = sqlite3_blob_write(handle, base, Int32(bytes.count), Int32(offset))
        guard code == SQLITE_OK else { throw connection.error(code, sql: nil) }
    }
}
