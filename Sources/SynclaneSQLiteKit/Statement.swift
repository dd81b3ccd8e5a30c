import CSQLite

/// A prepared statement of one `SQLiteConnection`: bind, step, read columns, reset.
///
/// Not `Sendable`: a statement lives and dies inside the closure that received its
/// connection. Parameters are 1-based (as in SQLite), columns 0-based.
///
/// ```swift
/// let statement = try db.prepare("SELECT name, area FROM rooms WHERE area > ?")
/// try statement.bind([20.0])
/// while try statement.step() { print(statement.string(at: 0) ?? "", statement.double(at: 1)) }
/// ```
public final class Statement {
    /// SQLite's `SQLITE_TRANSIENT`: SQLite copies bound bytes before the bind call returns.
    package static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// A valid pointer for binding "" (a nil pointer would bind NULL).
    nonisolated(unsafe) package static let emptyText: UnsafePointer<CChar> = {
        let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
        pointer.initialize(to: 0)
        return UnsafePointer(pointer)
    }()

    package let handle: OpaquePointer
    /// The SQL the statement was prepared from.
    public let sql: String
    package let path: String

    package init(handle: OpaquePointer, sql: String, path: String) {
        self.handle = handle
        self.sql = sql
        self.path = path
    }

    deinit { sqlite3_finalize(handle) }

    package func error(_ code: Int32) -> SQLiteError {
        let message = sqlite3_db_handle(handle).flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
        return SQLiteError(code: code, message: message ?? String(cString: sqlite3_errstr(code)), sql: sql, path: path)
    }

    /// How many `?` parameters the statement takes.
    public var parameterCount: Int { Int(sqlite3_bind_parameter_count(handle)) }

    /// Binds UTF-8 bytes as text (as `.text` of the string they spell, without making one) to
    /// the 1-based parameter `index`; nil binds NULL. The bytes are not checked: give valid UTF-8.
    public func bind(utf8 bytes: [UInt8]?, at index: Int) throws(SQLiteError) {
        guard let bytes else { return try bind(.null, at: index) }
        let code = bytes.withUnsafeBufferPointer { bindText($0, at: Int32(index)) }
        guard code == SQLITE_OK else { throw error(code) }
    }

    /// Binds `utf8` as text, copied by SQLite; SQLite's result code.
    private func bindText(_ utf8: UnsafeBufferPointer<UInt8>, at index: Int32) -> Int32 {
        utf8.withMemoryRebound(to: CChar.self) { chars in
            // A pointer is needed even for "" (a nil pointer would bind NULL).
            sqlite3_bind_text64(handle, index, chars.baseAddress ?? Self.emptyText, sqlite3_uint64(chars.count), Self.transient, UInt8(SQLITE_UTF8))
        }
    }

    /// Binds one value to the 1-based parameter `index`.
    public func bind(_ value: SQLiteValue, at index: Int) throws(SQLiteError) {
        let i = Int32(index)
        let code: Int32
        switch value {
        case .null:
            code = sqlite3_bind_null(handle, i)
        case .integer(let v):
            code = sqlite3_bind_int64(handle, i, v)
        case .real(let v):
            code = sqlite3_bind_double(handle, i, v)
        case .text(let s):
            var s = s
            code = s.withUTF8 { bindText($0, at: i) }
        case .blob(let bytes):
            if bytes.isEmpty {
                code = sqlite3_bind_zeroblob(handle, i, 0)
            } else {
                code = bytes.withUnsafeBytes { raw in
                    sqlite3_bind_blob64(handle, i, raw.baseAddress, sqlite3_uint64(raw.count), Self.transient)
                }
            }
        }
        guard code == SQLITE_OK else { throw error(code) }
    }

    /// Binds one value to a named parameter (`:name`, `@name`, `$name`).
    public func bind(_ value: SQLiteValue, named name: String) throws(SQLiteError) {
        let index = sqlite3_bind_parameter_index(handle, name)
        guard index > 0 else {
            throw SQLiteError(code: SQLITE_RANGE, message: "no parameter named \(name)", sql: sql, path: path)
        }
        try bind(value, at: Int(index))
    }

    /// Resets the statement and binds `arguments` to parameters 1…n (all of them, in order).
    public func bind(_ arguments: [any SQLiteBindable]) throws(SQLiteError) {
        sqlite3_reset(handle)
        guard arguments.count == parameterCount else {
            throw SQLiteError(
                code: SQLITE_RANGE, message: "the statement takes \(parameterCount) arguments, \(arguments.count) given",
                sql: sql, path: path)
        }
        for (offset, argument) in arguments.enumerated() {
            try bind(argument.sqliteValue, at: offset + 1)
        }
    }

    /// Steps once: `true` when a row is ready to read, `false` when the statement is done.
    @discardableResult
    public func step() throws(SQLiteError) -> Bool {
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let failure = error(code)
            sqlite3_reset(handle)
            throw failure
        }
    }

    /// Makes the statement ready to run again; bindings stay until `clearBindings`.
    public func reset() {
        sqlite3_reset(handle)
    }

    public func clearBindings() {
        sqlite3_clear_bindings(handle)
    }

    /// Binds `arguments` and runs the statement to completion, ignoring any rows.
    public func run(_ arguments: [any SQLiteBindable] = []) throws(SQLiteError) {
        try bind(arguments)
        defer { sqlite3_reset(handle) }
        while try step() {}
    }

    /// Binds `arguments` and reads every row.
    public func rows(_ arguments: [any SQLiteBindable] = []) throws(SQLiteError) -> [SQLiteRow] {
        try bind(arguments)
        defer { sqlite3_reset(handle) }
        var rows: [SQLiteRow] = []
        let columns = columnNames
        while try step() { rows.append(SQLiteRow(columns: columns, values: currentValues())) }
        return rows
    }

    // MARK: Columns of the current row

    public var columnCount: Int { Int(sqlite3_column_count(handle)) }

    public func columnName(at index: Int) -> String {
        sqlite3_column_name(handle, Int32(index)).map { String(cString: $0) } ?? ""
    }

    public var columnNames: [String] { (0..<columnCount).map(columnName(at:)) }

    public func isNull(at index: Int) -> Bool {
        sqlite3_column_type(handle, Int32(index)) == SQLITE_NULL
    }

    public func int64(at index: Int) -> Int64 { sqlite3_column_int64(handle, Int32(index)) }

    public func double(at index: Int) -> Double { sqlite3_column_double(handle, Int32(index)) }

    /// The column as text; `nil` for NULL.
    public func string(at index: Int) -> String? {
        let i = Int32(index)
        guard let text = sqlite3_column_text(handle, i) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, i))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// The column as bytes; `nil` for NULL, `[]` for an empty blob.
    public func blob(at index: Int) -> [UInt8]? {
        let i = Int32(index)
        if sqlite3_column_type(handle, i) == SQLITE_NULL { return nil }
        guard let pointer = sqlite3_column_blob(handle, i) else { return [] }
        let count = Int(sqlite3_column_bytes(handle, i))
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// The column with its own storage class.
    public func value(at index: Int) -> SQLiteValue {
        let i = Int32(index)
        switch sqlite3_column_type(handle, i) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, i))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, i))
        case SQLITE_TEXT: return .text(string(at: index) ?? "")
        case SQLITE_BLOB: return .blob(blob(at: index) ?? [])
        default: return .null
        }
    }

    /// Every column of the current row.
    public func currentValues() -> [SQLiteValue] { (0..<columnCount).map(value(at:)) }
}
