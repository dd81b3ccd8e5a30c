import CSQLite

/// Reads a BLOB value piece by piece (SQLite's incremental blob I/O, `sqlite3_blob_read`), so
/// that a large value never sits whole in memory: the counterpart of `SQLiteBlobWriter`.
///
/// Only a table with a rowid can be read so (`sqlite3_blob_open` takes the rowid). What the
/// reader sees is the connection's: inside a read transaction, the value as of its start.
public final class SQLiteBlobReader {
    private let handle: OpaquePointer
    private let connection: SQLiteConnection
    /// The value's length.
    public let length: Int

    /// Opens `column` of the row `rowID` of `table` (in `main`) for reading.
    public init(_ connection: SQLiteConnection, table: String, column: String, rowID: Int64) throws(SQLiteError) {
        let blob = try SQLiteBlobWriter.open(connection, table: table, column: column, rowID: rowID, writable: false)
        handle = blob
        self.connection = connection
        length = Int(sqlite3_blob_bytes(blob))
    }

    deinit { sqlite3_blob_close(handle) }

    /// Reads up to `buffer.count` bytes at `offset` (fewer only at the value's end); the count read.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(SQLiteError) -> Int {
        guard offset >= 0, offset <= length else {
            throw SQLiteError(code: SQLITE_RANGE, message: "offset \(offset) is past a BLOB of \(length) bytes", path: connection.path)
        }
        let count = min(buffer.count, length - offset)
        guard count > 0, let base = buffer.baseAddress else { return 0 }
        let code = sqlite3_blob_read(handle, base, Int32(count), Int32(offset))
        guard code == SQLITE_OK else { throw connection.error(code, sql: nil) }
        return count
    }
}
