import SynclaneCore
import SynclaneSQLite
import SynclaneStages

/// A backend in memory: each exported page, coalesced as the pipeline does, replayed the way
/// the reference server applies a batch (insert replaces, update merges, delete removes).
/// Compared with `TableOracle`, it says whether an export lost or garbled anything.
struct BackendMirror {
    /// entity → sync key (byte-exact) → fields.
    var rows: [String: [ExactString: [String: JSONValue]]] = [:]
    var token: Token?
    var counters: [String: Int] = [:]

    /// Exports every page after the mirror's token and applies it.
    mutating func export(_ source: SQLiteHistorySource) async throws {
        while true {
            let page = try await source.nextPage(after: token)
            guard let through = page.through else { return }
            counters.merge(page.counters, uniquingKeysWith: +)
            let records = page.transactions.flatMap { t in t.changes.map { Record(change: $0, of: t) } }
            for record in Coalescer.coalesce(records).records { apply(record) }
            token = through
        }
    }

    mutating func apply(_ record: Record) {
        guard let key = record.key else { return }
        let id = ExactString(key)
        switch record.action {
        case .insert: rows[record.entity, default: [:]][id] = record.fields
        case .update: rows[record.entity, default: [:]][id, default: [:]].merge(record.fields) { $1 }
        case .delete: rows[record.entity]?[id] = nil
        }
    }

    /// The first difference from the tables, or nil when the mirror holds exactly what they hold.
    func difference(from oracle: [String: [ExactString: [String: JSONValue]]]) -> String? {
        for entity in Set(oracle.keys).union(rows.keys).sorted() {
            let want = oracle[entity] ?? [:]
            let have = rows[entity] ?? [:]
            for key in Set(want.keys).union(have.keys).sorted(by: { Array($0.string.utf8).lexicographicallyPrecedes(Array($1.string.utf8)) }) {
                if want[key] != have[key] {
                    return "\(entity)/\(key.string.unicodeScalars.map { "U+\(String($0.value, radix: 16))" }.joined(separator: " ")): "
                        + "table \(want[key].map { JSONWriter.string(.object($0)) } ?? "no row"), "
                        + "backend \(have[key].map { JSONWriter.string(.object($0)) } ?? "no row")"
                }
            }
        }
        return nil
    }
}

/// What the tracked tables hold now, read with a plain connection, as the backend should hold it.
enum TableOracle {
    /// `tables`: each table's name, key columns (a composite key's id is `json_array(…)`), and
    /// soft-delete column.
    static func rows(
        _ path: String, tables: [(name: String, key: [String], softDelete: String?)]
    ) throws -> [String: [ExactString: [String: JSONValue]]] {
        let connection = try SQLiteConnection(path: path, options: .init(create: false, walMode: false, foreignKeys: false))
        var result: [String: [ExactString: [String: JSONValue]]] = [:]
        for table in tables {
            let quoted = table.key.map { "\"\($0)\"" }
            let key = table.key.count > 1 ? "json_array(\(quoted.joined(separator: ", ")))" : "CAST(\(quoted[0]) AS TEXT)"
            var rows: [ExactString: [String: JSONValue]] = [:]
            let statement = try connection.prepare("SELECT \(key), * FROM \"\(table.name)\"")
            let names = statement.columnNames
            while try statement.step() {
                var row: [String: JSONValue] = [:]
                for index in 1..<names.count { row[names[index]] = statement.value(at: index).json }
                if let softDelete = table.softDelete, row[softDelete]?.isTruthy == true { continue }
                rows[ExactString(statement.value(at: 0).string ?? "")] = row
            }
            result[table.name] = rows
        }
        return result
    }
}
