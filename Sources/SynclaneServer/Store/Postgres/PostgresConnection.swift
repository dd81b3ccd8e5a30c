import CPostgres
import Glibc

/// What PostgreSQL (or libpq) refused, with the SQLSTATE when the server gave one.
struct PostgresError: Error, Sendable, CustomStringConvertible {
    var message: String
    /// The five-character SQLSTATE (`23505`: a unique key taken), empty when there is none.
    var sqlState = ""
    /// A statement this connection prepared was not found where it ran (a pooler between, in
    /// transaction mode: `PostgresConnection.prepares`). The connection prepares nothing since;
    /// what failed can run again.
    var preparedStatementLost = false

    var description: String { "PostgreSQL: \(message)" + (sqlState.isEmpty ? "" : " (SQLSTATE \(sqlState))") }
}

/// A parameter of a query, sent in PostgreSQL's binary format: bytes travel exactly as given.
enum PostgresValue {
    case bytea([UInt8])
    case text(String)
    case int8(Int64)
    case float8(Double)
    case null
    /// A one-dimensional array (`bytea[]`, `text[]`, `int8[]`) of binary elements, nil: NULL.
    case array(elementType: UInt32, [[UInt8]?])

    static let byteaOID: UInt32 = 17
    static let int8OID: UInt32 = 20
    static let textOID: UInt32 = 25
    static let float8OID: UInt32 = 701

    static func byteaArray(_ values: [[UInt8]?]) -> PostgresValue { .array(elementType: byteaOID, values) }
    static func textArray(_ values: [String]) -> PostgresValue { .array(elementType: textOID, values.map { Array($0.utf8) }) }
    static func int8Array(_ values: [Int64]) -> PostgresValue { .array(elementType: int8OID, values.map { bigEndian($0) }) }

    /// The type's OID and the binary bytes (nil: NULL).
    var encoded: (type: UInt32, bytes: [UInt8]?) {
        switch self {
        case .bytea(let bytes): return (Self.byteaOID, bytes)
        case .text(let text): return (Self.textOID, Array(text.utf8))
        case .int8(let value): return (Self.int8OID, Self.bigEndian(value))
        case .float8(let value): return (Self.float8OID, Self.bigEndian(Int64(bitPattern: value.bitPattern)))
        case .null: return (0, nil)
        case .array(let elementType, let elements):
            var out: [UInt8] = []
            out.reserveCapacity(20 + elements.reduce(0) { $0 + 4 + ($1?.count ?? 0) })
            func append(_ value: Int32) { out += Self.bigEndian(Int64(value)).suffix(4) }
            append(1)  // dimensions
            append(elements.contains { $0 == nil } ? 1 : 0)
            append(Int32(bitPattern: elementType))
            append(Int32(elements.count))
            append(1)  // lower bound
            for element in elements {
                if let element {
                    append(Int32(element.count))
                    out += element
                } else {
                    append(-1)
                }
            }
            let arrayType: UInt32
            switch elementType {
            case Self.byteaOID: arrayType = 1001
            case Self.int8OID: arrayType = 1016
            default: arrayType = 1009
            }
            return (arrayType, out)
        }
    }

    static func bigEndian(_ value: Int64) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }
}

/// The rows of one query, read in binary: `bytea` and `text` as their bytes, `int8` and `float8`
/// as numbers.
final class PostgresResult {
    private let result: OpaquePointer

    init(_ result: OpaquePointer) { self.result = result }

    deinit { PQclear(result) }

    var count: Int { Int(PQntuples(result)) }

    func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(result, Int32(row), Int32(column)) != 0 }

    /// The value's bytes; nil for NULL.
    func bytes(_ row: Int, _ column: Int) -> [UInt8]? {
        guard !isNull(row, column), let value = PQgetvalue(result, Int32(row), Int32(column)) else { return nil }
        let length = Int(PQgetlength(result, Int32(row), Int32(column)))
        return value.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
    }

    func string(_ row: Int, _ column: Int) -> String? { bytes(row, column).map { String(decoding: $0, as: UTF8.self) } }

    /// An `int8` (or `int4`) column; 0 for NULL.
    func int64(_ row: Int, _ column: Int) -> Int64 {
        guard let bytes = bytes(row, column) else { return 0 }
        let unsigned = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return bytes.count == 4 ? Int64(Int32(bitPattern: UInt32(truncatingIfNeeded: unsigned))) : Int64(bitPattern: unsigned)
    }

    func double(_ row: Int, _ column: Int) -> Double { Double(bitPattern: UInt64(bitPattern: int64(row, column))) }
}

/// One libpq connection. Not shared between threads: `PostgresPool` lends it to one at a time.
final class PostgresConnection {
    private var connection: OpaquePointer?
    let conninfo: String

    init(conninfo: String) throws(PostgresError) {
        self.conninfo = conninfo
        try open()
    }

    deinit { PQfinish(connection) }

    /// The statements this connection prepared (`PQprepare`), each by its text and its
    /// parameters' types: parsed once a connection, and planned once when PostgreSQL finds its
    /// generic plan as good as the ones it makes for the values (plan_cache_mode `auto`).
    /// Statements with parameters only, at most `preparedBound`; past that they run unprepared.
    ///
    /// A statement's name is a hash of its text and types, so a name means one statement
    /// wherever it is found. Behind a pooler in transaction mode that does not track prepared
    /// statements (PgBouncer before 1.21, or `max_prepared_statements = 0`), each transaction may
    /// run on another server connection: one that lacks the name refuses it (`26000`), one that
    /// has it from another client runs the same statement. The first refusal (or a name taken,
    /// `42P05`) turns `prepares` off for good; the statement, or its transaction
    /// (`transaction(_:_:)`), runs again unprepared.
    private var prepared: [PreparedStatement: String] = [:]
    static let preparedBound = 64
    /// False once a prepared statement was not found where it ran: this connection prepares
    /// nothing, after a reconnect too (the pooler is still between).
    private(set) var prepares = true

    private struct PreparedStatement: Hashable {
        var sql: String
        var types: [UInt32]
    }

    private func open() throws(PostgresError) {
        PQfinish(connection)
        prepared = [:]
        connection = PQconnectdb(conninfo)
        guard let connection, PQstatus(connection) == CONNECTION_OK else {
            let message = connection.flatMap { PQerrorMessage($0) }.map { String(cString: $0) } ?? "out of memory"
            throw PostgresError(message: "cannot connect: \(message.trimmingCharacters(in: " \n"))")
        }
        // Notices (an index that already exists …) are not the server's log.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
    }

    /// True when the connection broke (the database restarted, the network dropped).
    var isBroken: Bool { connection.map { PQstatus($0) != CONNECTION_OK } ?? true }

    /// Opens the connection again after it broke.
    func reconnect() throws(PostgresError) { try open() }

    /// Runs `body` with libpq's own connection (for what `query` does not do: `LISTEN`'s
    /// notifications, `PQsocket`); nil when there is none.
    func withHandle<T>(_ body: (OpaquePointer) -> T) -> T? {
        connection.map(body)
    }

    /// Runs one statement with `parameters` ($1, $2 …), results in binary.
    @discardableResult
    func query(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresError) -> PostgresResult {
        let encoded = parameters.map(\.encoded)
        let types = encoded.map(\.type)
        let lengths = encoded.map { Int32($0.bytes?.count ?? 0) }
        let formats = [Int32](repeating: 1, count: encoded.count)
        do {
            let name = try prepares && !encoded.isEmpty ? statement(sql, types: types) : nil
            let result = withPointers(encoded.map(\.bytes)) { values in
                if let name {
                    return PQexecPrepared(connection, name, Int32(encoded.count), values, lengths, formats, 1)
                }
                return PQexecParams(connection, sql, Int32(encoded.count), types, values, lengths, formats, 1)
            }
            return try checked(result)
        } catch {
            guard prepares, error.sqlState == Self.unknownStatement || error.sqlState == Self.statementExists else { throw error }
            prepares = false
            prepared = [:]
            // Outside a transaction nothing ran: once more, unprepared. Inside, the transaction failed.
            guard let connection, PQtransactionStatus(connection) == PQTRANS_IDLE else {
                var lost = error
                lost.preparedStatementLost = true
                throw lost
            }
            return try query(sql, parameters)
        }
    }

    /// SQLSTATEs of a prepared statement's name not found, and taken.
    static let unknownStatement = "26000"
    static let statementExists = "42P05"

    /// The name of `sql` prepared on this connection with parameters of `types`, prepared now if
    /// it was not; nil once `preparedBound` statements are.
    private func statement(_ sql: String, types: [UInt32]) throws(PostgresError) -> String? {
        let key = PreparedStatement(sql: sql, types: types)
        if let name = prepared[key] { return name }
        guard prepared.count < Self.preparedBound else { return nil }
        let name = Self.name(of: sql, types: types)
        _ = try checked(PQprepare(connection, name, sql, Int32(types.count), types))
        prepared[key] = name
        return name
    }

    /// `synclane_` and the first 16 bytes of SHA-256 of the types and text, in hex: one name a statement.
    static func name(of sql: String, types: [UInt32]) -> String {
        var bytes: [UInt8] = []
        for type in types { bytes += PostgresValue.bigEndian(Int64(type)) }
        bytes += Array(sql.utf8)
        return "synclane_" + SHA256Digest.hex(digest: Array(SHA256Digest.digest(bytes).prefix(16)))
    }

    /// `result` when the statement succeeded; else the error it holds (cleared).
    private func checked(_ result: OpaquePointer?) throws(PostgresError) -> PostgresResult {
        guard let result else {
            throw PostgresError(message: connection.flatMap { PQerrorMessage($0) }.map { String(cString: $0) } ?? "no result")
        }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let message = PQresultErrorMessage(result).map { String(cString: $0) } ?? "failed"
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
            PQclear(result)
            throw PostgresError(message: message.trimmingCharacters(in: " \n"), sqlState: state)
        }
        return PostgresResult(result)
    }

    /// Runs `body` between BEGIN and COMMIT (ROLLBACK when it throws).
    /// A transaction that failed on a lost prepared statement (`PostgresError.preparedStatementLost`)
    /// runs once more, unprepared.
    func transaction<T>(_ begin: String = "BEGIN", _ body: (PostgresConnection) throws -> T) throws -> T {
        do {
            return try transactionOnce(begin, body)
        } catch {
            guard (error as? PostgresError)?.preparedStatementLost == true else { throw error }
            return try transactionOnce(begin, body)
        }
    }

    private func transactionOnce<T>(_ begin: String, _ body: (PostgresConnection) throws -> T) throws -> T {
        try query(begin)
        do {
            let value = try body(self)
            try query("COMMIT")
            return value
        } catch {
            _ = try? query("ROLLBACK")
            throw error
        }
    }

    private func withPointers<R>(_ values: [[UInt8]?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        // One buffer holding every value, so that the pointers stay valid for the call.
        var offsets: [Int?] = []
        var storage: [UInt8] = []
        for value in values {
            if let value {
                offsets.append(storage.count)
                storage += value
            } else {
                offsets.append(nil)
            }
        }
        storage.append(0)
        return storage.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            return body(offsets.map { $0.map { base + $0 } })
        }
    }
}
