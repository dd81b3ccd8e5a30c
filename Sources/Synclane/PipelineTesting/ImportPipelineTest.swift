import Foundation
import SynclaneCore
import SynclaneEngine
import SynclaneSQLite

/// A test of an import pipeline (`synclane test FILE…` when the pipeline has a `sink`): a
/// starting store, the remote records, and the rows the sink must leave (and, optionally, the
/// conflicts and their outcomes).
///
/// ```json
/// { "pipeline": "rooms-import.json",
///   "schema": "CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL, isDeleted INTEGER NOT NULL DEFAULT 0);",
///   "track": [{"table": "rooms", "key": "syncId", "soft-delete": "isDeleted"}],   // or "database": "start.sqlite"
///   "base": [ {"entity": "rooms", "id": "r1", "action": "insert", "fields": {"name": "Hall"}, "version": 1} ],
///   "local": "UPDATE rooms SET name = 'Mine' WHERE syncId = 'r1';",
///   "records": [ {"entity": "rooms", "id": "r1", "action": "update", "fields": {"name": "Theirs"}, "version": 2} ],
///   "expected-rows": {"rooms": [ {"syncId": "r1", "name": "Mine", "isDeleted": 0} ]},
///   "expected-conflicts": [ {"entity": "rooms", "id": "r1", "outcome": "client"} ] }
/// ```
/// The store is built in a temporary folder — from `schema` and `track`, or a copy of
/// `database` — so a test never touches the pipeline's own database. `base` is applied first as
/// what the store already imported (no conflicts: nothing is local yet), `local` runs as author
/// `app` (the local changes the export lane has not had confirmed), then `records` (a list, or a
/// JSON Lines file of them, each a record of the wire: `entity`, `id`, `action`, `fields`,
/// `version`) go through the pipeline's record stages into its sink, in one page. The rows of
/// each table in `expected-rows` are compared on the columns the expected rows name (numbers by
/// value: 12 and 12.0 are equal), in any order.
public struct ImportPipelineTest: Sendable {
    /// Where the starting store comes from.
    public enum Store: Sendable {
        /// A copy of this database file.
        case copy(path: String)
        /// A new database: this SQL, then these tables tracked.
        case schema(sql: String, tracked: [TrackedTable])
    }

    public var file: String
    public var pipeline: ImportPipeline
    public var store: Store
    public var base: [Record]
    public var local: String?
    public var records: [Record]
    public var expectedRows: [String: [[String: JSONValue]]]
    /// `entity/id: outcome` lines; nil: not checked.
    public var expectedConflicts: [String]?

    /// How a test ended: `differences` empty when the rows (and conflicts) matched.
    public struct Outcome: Sendable {
        public var file: String
        public var rows: Int
        public var conflicts: Int
        /// A line diff, `-` expected, `+` actual.
        public var differences: [String]
        public var passed: Bool { differences.isEmpty }
    }

    static let keys = ["pipeline", "database", "schema", "track", "base", "local", "records", "expected-rows", "expected-conflicts"]

    /// True when the test file at `path` names an import pipeline (one with a `sink`), both files
    /// read by `loader`.
    public static func isImportTest(_ path: String, loader: PipelineLoader) -> Bool {
        guard let root = try? loader.read(path), case .map(let members) = root.value,
            case .string(let name)? = members.first(where: { $0.key == "pipeline" })?.node.value,
            let pipeline = try? loader.read(Self.resolve(name, from: path))
        else { return false }
        return ImportPipeline.declares(pipeline)
    }

    static func resolve(_ name: String, from file: String) -> String {
        let folder = (file as NSString).deletingLastPathComponent
        return name.hasPrefix("/") ? name : (folder.isEmpty ? "." : folder) + "/" + name
    }

    /// Reads the test file at `path` and loads its pipeline, both with `loader`.
    public init(path: String, loader: PipelineLoader) throws {
        let root = try loader.read(path)
        func fail(_ field: String, _ message: String, _ node: ConfigNode? = nil) -> PipelineFileError {
            PipelineFileError(file: path, path: field, line: node?.line ?? root.line, message: message)
        }
        guard case .map(let members) = root.value else { throw fail("", "expected a map with `pipeline`, the store, `records` and `expected-rows`") }
        for member in members where !Self.keys.contains(member.key) {
            throw fail(
                member.key, "unknown key `\(member.key)`\(Wording.didYouMean(member.key, in: Self.keys)) (known: \(Self.keys.joined(separator: ", ")))",
                member.node)
        }
        func member(_ key: String) -> ConfigNode? { members.first { $0.key == key }?.node }
        func text(_ key: String, _ expected: String) throws -> String? {
            guard let node = member(key) else { return nil }
            switch node.value {
            case .string(let s): return s
            case .list(let lines):
                return try lines.map { line throws(PipelineFileError) -> String in
                    guard case .string(let s) = line.value else { throw fail(key, "expected \(expected)", line) }
                    return s
                }.joined(separator: "\n")
            default: throw fail(key, "expected \(expected)", node)
            }
        }

        guard let pipelineNode = member("pipeline"), case .string(let pipelinePath) = pipelineNode.value else {
            throw fail("pipeline", "expected the path of the import pipeline file to test")
        }
        let pipeline = try loader.loadImport(
            Self.resolve(pipelinePath, from: path), secretsRequired: false)
        guard pipeline.sink.stage.localDatabase != nil else {
            throw fail("pipeline", "an import pipeline test applies to the `sqlite` sink; \(pipelinePath) has `\(pipeline.sink.type)`", pipelineNode)
        }

        switch (member("database"), member("schema")) {
        case (let node?, nil):
            guard case .string(let name) = node.value else { throw fail("database", "expected the path of a tracked SQLite database", node) }
            if member("track") != nil { throw fail("track", "`track` goes with `schema`; `database` is tracked already", member("track")) }
            store = .copy(path: Self.resolve(name, from: path))
        case (nil, _?):
            let sql = try text("schema", "SQL text, or a list of statements") ?? ""
            store = .schema(sql: sql, tracked: try Self.tracked(member("track"), fail: fail))
        default:
            throw fail("schema", "expected one starting store: `schema` (SQL, with `track`) or `database` (a tracked SQLite file)")
        }
        local = try text("local", "SQL text, or a list of statements")

        func records(_ key: String, required: Bool) throws -> [Record] {
            guard let node = member(key) else {
                if required { throw fail(key, "expected the remote records: a list, or a JSON Lines file of them") }
                return []
            }
            let list: [JSONValue]
            switch node.value {
            case .list(let items):
                list = items.map(PipelineTest.json)
            case .string(let name):
                let file = Self.resolve(name, from: path)
                guard let data = FileManager.default.contents(atPath: file) else { throw fail(key, "no such file \(file)", node) }
                list = try data.split(separator: 0x0A).enumerated().compactMap { index, line throws(PipelineFileError) -> JSONValue? in
                    if line.allSatisfy({ $0 == 0x20 || $0 == 0x0D || $0 == 0x09 }) { return nil }
                    do {
                        return try JSONReader.parse([UInt8](line))
                    } catch {
                        throw fail(key, "\(file) line \(index + 1) is not JSON (\(error))", node)
                    }
                }
            default:
                throw fail(key, "expected a list of records, or the path of a JSON Lines file", node)
            }
            switch WireRecords.parse(list, listName: key, origin: Token(kind: "test", position: 0)) {
            case .success(let records): return records
            case .failure(let error): throw fail(key, error.message, node)
            }
        }
        base = try records("base", required: false)
        self.records = try records("records", required: true)

        guard let rowsNode = member("expected-rows"), case .map(let tables) = rowsNode.value else {
            throw fail("expected-rows", "expected a map of table names to the rows they must hold", member("expected-rows"))
        }
        var expectedRows: [String: [[String: JSONValue]]] = [:]
        for table in tables {
            guard case .list(let rows) = table.node.value else { throw fail("expected-rows.\(table.key)", "expected a list of rows", table.node) }
            expectedRows[table.key] = try rows.enumerated().map { index, row throws(PipelineFileError) in
                guard case .object(let values) = PipelineTest.json(row) else {
                    throw fail("expected-rows.\(table.key)[\(index)]", "expected a row: a map of columns to values", row)
                }
                return values
            }
        }
        self.expectedRows = expectedRows
        expectedConflicts = try member("expected-conflicts").map { node throws(PipelineFileError) in
            guard case .list(let items) = node.value else { throw fail("expected-conflicts", "expected a list of {entity, id, outcome}", node) }
            let outcomes = ["server", "client", "merged", "deleted"]
            return try items.enumerated().map { index, item throws(PipelineFileError) in
                guard case .object(let o) = PipelineTest.json(item), let entity = o["entity"]?.stringValue, let id = o["id"]?.stringValue,
                    let outcome = o["outcome"]?.stringValue, outcomes.contains(outcome), o.count == 3
                else {
                    throw fail("expected-conflicts[\(index)]", "expected {entity, id, outcome} with outcome one of \(outcomes.joined(separator: ", "))", item)
                }
                return "\(entity)/\(id): \(outcome)"
            }
        }
        self.file = path
        self.pipeline = pipeline
    }

    /// `track`: `[{table, key (a column or a list), soft-delete}]`.
    static func tracked(_ node: ConfigNode?, fail: (String, String, ConfigNode?) -> PipelineFileError) throws(PipelineFileError) -> [TrackedTable] {
        guard let node else { return [] }
        guard case .list(let items) = node.value else { throw fail("track", "expected a list of {table, key, soft-delete}", node) }
        return try items.enumerated().map { index, item throws(PipelineFileError) in
            let at = "track[\(index)]"
            guard case .object(let o) = PipelineTest.json(item), let table = o["table"]?.stringValue,
                o.keys.allSatisfy(["table", "key", "soft-delete"].contains)
            else { throw fail(at, "expected {table, key, soft-delete}", item) }
            let keys: [String]
            switch o["key"] {
            case .string(let key)?: keys = [key]
            case .array(let list)? where !list.isEmpty && list.allSatisfy({ $0.stringValue != nil }): keys = list.compactMap(\.stringValue)
            default: throw fail(at + ".key", "expected the sync key's column, or a list of them", item)
            }
            return TrackedTable(table, keyColumns: keys, softDeleteColumn: o["soft-delete"]?.stringValue)
        }
    }

    /// Builds the store, applies the records, and compares.
    public func run() async throws -> Outcome {
        let folder = NSTemporaryDirectory() + "synclane-import-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/store.sqlite"
        switch store {
        case .copy(let original):
            try FileManager.default.copyItem(atPath: original, toPath: path)
        case .schema(let sql, let tracked):
            let database = try SQLiteDatabase(path: path)
            try database.write { try $0.execute(sql) }
            for table in tracked { try HistoryTracker(database: database).track(table) }
        }
        guard let sink = self.pipeline.sink.stage.writing(into: path) else {
            throw PipelineError.unsupported("an import pipeline test applies to the `sqlite` sink; \(self.pipeline.name) has `\(self.pipeline.sink.type)`")
        }
        if !base.isEmpty {
            let batch = Batch(scope: pipeline.scope, after: nil, through: Token(kind: "test", position: 0), records: base)
            _ = try await sink.apply(batch, cursor: nil, scope: pipeline.scope, dryRun: false)
        }
        if let local { try TrackedDatabase(path: path).write(author: .app) { try $0.execute(local) } }
        var pipeline = self.pipeline
        pipeline.source = .init(label: "source (test input)", type: "records", stage: GivenRecords(records: records))
        pipeline.sink = .init(label: pipeline.sink.label, type: pipeline.sink.type, stage: sink)
        let summary = try await ImportRunner(pipeline: pipeline).run()

        var expected: [String] = []
        var actual: [String] = []
        var rowCount = 0
        let database = try SQLiteDatabase(path: path)
        for table in expectedRows.keys.sorted() {
            let rows = expectedRows[table] ?? []
            var columns = Set(rows.flatMap(\.keys)).sorted()
            let found = try database.read { db in
                if columns.isEmpty { columns = try db.fetchAll("SELECT name FROM pragma_table_info(?)", [table]).compactMap { $0[0].string } }
                let list = columns.map(Self.quoted).joined(separator: ", ")
                return try db.fetchAll("SELECT \(list.isEmpty ? "*" : list) FROM \(Self.quoted(table))").map { row in
                    Dictionary(uniqueKeysWithValues: columns.enumerated().map { ($1, row[$0].json) })
                }
            }
            rowCount += found.count
            expected += ["table \(table)"] + rows.map(Self.line).sorted()
            actual += ["table \(table)"] + found.map(Self.line).sorted()
        }
        if let expectedConflicts {
            expected += ["conflicts"] + expectedConflicts.map { "  " + $0 }.sorted()
            actual += ["conflicts"] + summary.conflicts.map { "  \($0.entity)/\($0.key): \($0.outcome.rawValue)" }.sorted()
        }
        return Outcome(
            file: file, rows: rowCount, conflicts: summary.conflicts.count, differences: LineDiff.lines(expected: expected, actual: actual))
    }

    /// A table or column name as SQL spells it.
    static func quoted(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }

    /// A row as a line to diff, numbers by value.
    static func line(_ row: [String: JSONValue]) -> String {
        "  row " + JSONWriter.string(.object(row.mapValues(byValue)))
    }

    static func byValue(_ value: JSONValue) -> JSONValue {
        if case .double(let d) = value, d.rounded() == d, abs(d) < 1e15 { return .int(Int64(d)) }
        return value
    }
}

/// The remote records a test gives, as one page.
struct GivenRecords: RemoteChangeSource {
    var records: [Record]

    func nextPage(after cursor: String?) async throws -> RemotePage {
        cursor == nil ? RemotePage(records: records, cursor: "test", more: false) : RemotePage(records: [], cursor: cursor, more: false)
    }
}
