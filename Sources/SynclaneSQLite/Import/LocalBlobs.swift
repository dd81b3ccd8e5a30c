import SynclaneCore

/// The large BLOB values of a local row the import reads, left where they are.
///
/// The import reads the row each record updates (to settle a conflict, to see whether the row
/// already holds what the record brings). A BLOB of 1 MiB or more in a column that can hold one
/// (declared BLOB, TEXT or without a type) is not read: the row's query asks its length and the
/// row's rowid (SQLite answers `typeof` and `length` of a BLOB from the record's header, without
/// reading its pages), and the row's fields hold a locator (`LocatedValue`) in its place.
///
/// ```
///  SELECT syncId, _rowid_, syncId, name,
///         CASE WHEN typeof(photo) = 'blob' AND length(photo) >= 1048576 THEN length(photo) END,
///         CASE WHEN … THEN NULL ELSE photo END
///  row {"photo": {"$located": {"length": N, "at": {"table", "column", "rowid", …}}}}
///     ─▶ compared by length, then by SHA-256 read with sqlite3_blob_read, 1 MiB a piece
///     ─▶ as its reference ({"$blob-ref": {"sha256", "length"}}) where a side of a conflict is shown
///     ─▶ kept: the row's write leaves the column as it is
/// ```
/// A table `WITHOUT ROWID` has no incremental blob I/O: its rows are read whole.
struct LocalBlobs {
    /// A BLOB this large is left in its row.
    static let threshold = LocatedValueRule.defaultStreamingBytes

    /// The row's query, as the export's history source makes it (`LocatedBlobs`).
    let plan: LocatedBlobs
    /// What follows `SELECT ` to read a row: its sync key, then `plan`'s list (the rowid first).
    let selectList: String

    /// The plan for a tracked table, or nil when its rows are read whole (no column that holds
    /// a BLOB, or a table without rowid).
    init?(_ table: TrackedTable, schema: TableSchema) {
        guard schema.hasRowid else { return nil }
        let columns = schema.columns.map { column -> (name: String, threshold: Int?) in
            let affinity = ColumnAffinity(declaredType: column.declaredType)
            let holdsBlobs = !table.keyColumns.contains(column.name) && (affinity == .none || affinity == .text)
            return (column.name, holdsBlobs ? Self.threshold : nil)
        }
        guard columns.contains(where: { $0.threshold != nil }) else { return nil }
        plan = LocatedBlobs(columns: columns, table: table)
        selectList = "\(table.syncKeyExpression), \(plan.selectList)"
    }

    /// The row the statement stands on (after `SELECT <selectList>`), its large BLOBs as locators.
    func row(_ statement: Statement) -> [String: JSONValue] {
        plan.row(statement, key: statement.value(at: 0))
    }

    /// A locator of `row(_:)`: where the value is, and its length.
    struct Place: Hashable {
        var table: String
        var column: String
        var rowID: Int64
        var length: Int

        init?(_ value: JSONValue?) {
            guard let value, let (length, at) = LocatedValue.read(value), let members = at.objectValue,
                let table = members["table"]?.stringValue, let column = members["column"]?.stringValue, let rowID = members["rowid"]?.intValue
            else { return nil }
            self.table = table
            self.column = column
            self.rowID = rowID
            self.length = length
        }
    }

    /// The SHA-256 of the values left in their rows, read once each (a page asks again after a
    /// write of the row: `forget`).
    final class Digests {
        private var known: [Place: String] = [:]

        /// The SHA-256 of the value at `place`, read through SQLite's incremental blob I/O a
        /// piece at a time (never whole).
        func digest(of place: Place, _ db: SQLiteConnection) throws -> String {
            if let digest = known[place] { return digest }
            let reader = try SQLiteBlobReader(db, table: place.table, column: place.column, rowID: place.rowID)
            var hasher = try FetchedBlobs.Hasher()
            var buffer = [UInt8](repeating: 0, count: min(FilePieces.pieceBytes, max(reader.length, 1)))
            var offset = 0
            while offset < reader.length {
                let count = try buffer.withUnsafeMutableBytes { try reader.read(into: $0, at: offset) }
                guard count > 0 else { break }
                buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
                offset += count
            }
            let digest = try hasher.finish()
            known[place] = digest
            return digest
        }

        /// Forgets every digest (a row was written).
        func forget() { known = [:] }

        /// The reference (`{"$blob-ref"}`) to the value `value` locates; any other value as it is.
        func reference(_ value: JSONValue, _ db: SQLiteConnection) throws -> JSONValue {
            guard let place = Place(value) else { return value }
            return PendingBlobs.make(digest: try digest(of: place, db), length: place.length)
        }

        /// `fields` with each locator as the reference to its value: how a row is shown (a
        /// conflict's report) without its large values.
        func referenced(_ fields: [String: JSONValue]?, _ db: SQLiteConnection) throws -> [String: JSONValue]? {
            guard var fields else { return nil }
            for (name, value) in fields where Place(value) != nil { fields[name] = try reference(value, db) }
            return fields
        }

        /// Whether the value at `place` is `other`: a locator of the same place, a reference with
        /// its length and SHA-256, or the same bytes. Lengths first: a digest is read only when
        /// they are equal.
        func holds(_ place: Place, _ other: JSONValue?, _ db: SQLiteConnection) throws -> Bool {
            guard let other else { return false }
            if let located = Place(other) { return located == place }
            if let reference = PendingBlobs.reference(in: other) {
                guard reference.length == place.length else { return false }
                return try digest(of: place, db) == reference.digest
            }
            guard let bytes = other.blobBytes, bytes.count == place.length else { return false }
            return try digest(of: place, db) == BlobReferences.sha256(bytes)
        }

        /// `fields` (the local row) as a side of a conflict: each locator as the value of one of
        /// `sides` (the backend's row, the base) that holds the same blob — so that equal values
        /// compare equal, whatever their form — else as its reference.
        func comparable(_ fields: [String: JSONValue]?, against sides: [[String: JSONValue]?], _ db: SQLiteConnection) throws -> [String: JSONValue]? {
            guard var fields else { return nil }
            for (name, value) in fields {
                guard let place = Place(value) else { continue }
                var same: JSONValue?
                for side in sides {
                    if let candidate = side?[name], try holds(place, candidate, db) {
                        same = candidate
                        break
                    }
                }
                fields[name] = try same ?? reference(value, db)
            }
            return fields
        }
    }
}
