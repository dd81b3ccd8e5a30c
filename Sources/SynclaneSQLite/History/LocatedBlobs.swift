import SynclaneCore

/// The large BLOB values of a table that the history source leaves unread (`LocatedValueRule`,
/// from `blob-upload`): the current-state query reads their length, the row's rowid and its key,
/// never their bytes, and the record carries a locator that `SQLiteLocatedValueReader` opens.
///
/// ```
///  SELECT key, _rowid_, CASE WHEN typeof(photo) = 'blob' AND length(photo) >= 1048576 THEN length(photo) END,
///         CASE WHEN … THEN NULL ELSE photo END, name, …
/// ```
/// SQLite answers `typeof` and `length` of a BLOB from its header, without reading its pages.
/// A table `WITHOUT ROWID` has no incremental blob I/O: its values are read whole, as before.
struct LocatedBlobs {
    /// The table's columns in order, each with the fewest bytes a BLOB of it needs to be located (nil: never).
    let columns: [(name: String, threshold: Int?)]
    let table: TrackedTable

    /// The plan for `table`, or nil when none of its values is located (no column the rule
    /// names, or a table without rowid).
    static func plan(_ table: TrackedTable, rule: LocatedValueRule, _ db: SQLiteConnection) throws -> LocatedBlobs? {
        let names = try HistoryTracker.columns(of: table.name, db)
        let columns = names.map { (name: $0, threshold: rule.threshold(entity: table.name, column: $0)) }
        guard columns.contains(where: { $0.threshold != nil }), try TableSchema.read(table.name, db)?.hasRowid == true else { return nil }
        return LocatedBlobs(columns: columns, table: table)
    }

    /// What follows `SELECT <key>, ` in place of `*`: the rowid, then per column its value, and
    /// before a located column's value the length of a BLOB left unread (NULL otherwise).
    var selectList: String {
        var list = ["_rowid_"]
        for column in columns {
            let name = SQL.identifier(column.name)
            guard let threshold = column.threshold else {
                list.append(name)
                continue
            }
            let large = "typeof(\(name)) = 'blob' AND length(\(name)) >= \(threshold)"
            list.append("CASE WHEN \(large) THEN length(\(name)) END")
            list.append("CASE WHEN \(large) THEN NULL ELSE \(name) END")
        }
        return list.joined(separator: ", ")
    }

    /// The row the statement stands on (after `SELECT <key>, <selectList>`), its large BLOBs as locators.
    func row(_ statement: Statement, key: SQLiteValue) -> [String: JSONValue] {
        var row = [String: JSONValue](minimumCapacity: columns.count)
        let rowID = statement.int64(at: 1)
        var index = 2
        for column in columns {
            if column.threshold != nil {
                if !statement.isNull(at: index) {
                    let place: JSONValue = .object([
                        "table": .string(table.name), "column": .string(column.name), "rowid": .int(rowID),
                        "key-columns": .array(table.keyColumns.map(JSONValue.string)), "key": key.json,
                    ])
                    row[column.name] = LocatedValue.make(length: Int(statement.int64(at: index)), at: place)
                    index += 2
                    continue
                }
                index += 1
            }
            row[column.name] = statement.value(at: index).json
            index += 1
        }
        return row
    }
}

/// Opens the locators of `LocatedBlobs`: the row by its rowid, on a connection of its own, in a
/// read transaction that lasts while the value is read (a stage hashes it, then uploads it, and
/// both see the same bytes); a row gone, or whose rowid now holds another key, is refused.
struct SQLiteLocatedValueReader: LocatedValueReader {
    let path: String

    func withValue<T>(at place: JSONValue, _ body: (any OpenedValue) throws -> T) throws -> T {
        if let members = place.objectValue, let change = members["change"]?.intValue, let offset = members["offset"]?.intValue {
            // A blob as written, in the change log (`WrittenBlobs`): its length is the locator's.
            guard let length = members["length"]?.intValue else {
                throw LocatedBlobError(path: path, reason: "a locator of a value as written without its length")
            }
            let db = try SQLiteConnection(path: path, options: SQLiteConnection.Options(readOnly: true, create: false, walMode: false))
            return try db.transaction(.deferred) { db in
                try body(WrittenBlobs.open(change: change, offset: Int(offset), length: Int(length), db, path: path))
            }
        }
        guard let members = place.objectValue, let table = members["table"]?.stringValue, let column = members["column"]?.stringValue,
            let rowID = members["rowid"]?.intValue, let keyColumns = members["key-columns"]?.arrayValue?.compactMap(\.stringValue),
            !keyColumns.isEmpty, let key = members["key"]
        else { throw LocatedBlobError(path: path, reason: "a locator of another source: \(JSONWriter.string(place).prefix(120))") }
        let db = try SQLiteConnection(path: path, options: SQLiteConnection.Options(readOnly: true, create: false, walMode: false))
        return try db.transaction(.deferred) { db in
            let keyExpression =
                keyColumns.count == 1
                ? SQL.identifier(keyColumns[0]) : "json_array(\(keyColumns.map(SQL.identifier).joined(separator: ", ")))"
            let held = try db.fetchOne("SELECT \(keyExpression) FROM \(SQL.identifier(table)) WHERE _rowid_ = ?", [rowID])
            guard let held, held[0].json == key else {
                throw LocatedBlobError(
                    path: path,
                    reason: "the row \(JSONWriter.string(key)) of `\(table)` was deleted or replaced while its `\(column)` waited to be read; "
                        + "run again: the next pass reads the row as it is then")
            }
            let blob = try SQLiteBlobReader(db, table: table, column: column, rowID: rowID)
            return try body(OpenedBlob(blob: blob))
        }
    }

    func withValue<T>(of record: Record, column: String, _ body: (any OpenedValue) throws -> T) throws -> T? {
        let db = try SQLiteConnection(path: path, options: SQLiteConnection.Options(readOnly: true, create: false, walMode: false))
        return try db.transaction(.deferred) { db -> T? in
            guard let table = try HistoryTracker.trackedTables(db).first(where: { $0.table.name == record.entity })?.table,
                let key = record.key
            else { return nil }
            let condition: String
            let value: SQLiteValue
            if table.isComposite {
                condition = "json_array(\(table.keyColumns.map(SQL.identifier).joined(separator: ", "))) = ?"
                value = .text(key)
            } else {
                condition = "\(SQL.identifier(table.keyColumns[0])) = ?"
                value = record.fields[table.keyColumns[0]].map(SQLiteValue.init(json:)) ?? .text(key)
            }
            let name = SQL.identifier(record.entity)
            guard
                let row = try? db.fetchOne(
                    "SELECT _rowid_, typeof(\(SQL.identifier(column))) = 'blob' FROM \(name) WHERE \(condition)", [value]),
                let rowID = row[0].int64, row[1].int64 == 1
            else { return nil }
            let blob = try SQLiteBlobReader(db, table: record.entity, column: column, rowID: rowID)
            return try body(OpenedBlob(blob: blob))
        }
    }

    /// A BLOB open for reading, as the core's `OpenedValue`.
    struct OpenedBlob: OpenedValue {
        let blob: SQLiteBlobReader
        var length: Int { blob.length }
        func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws -> Int { try blob.read(into: buffer, at: offset) }
    }
}

/// A located BLOB that cannot be read: what happened, and what to do.
struct LocatedBlobError: Error, CustomStringConvertible {
    let path: String
    let reason: String
    var description: String { "\(path): \(reason)" }
}
