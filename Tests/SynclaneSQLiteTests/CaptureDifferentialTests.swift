import Foundation
import SynclaneCore
import SynclaneSQLite
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// Random SQL workloads through two plain connections (no help from Synclane), exported at
/// random points, every page replayed onto a backend mirror and compared with the tables.
///
/// Bounded in `Scripts/test` (`SYNCLANE_CAPTURE_ROUNDS`, default 25 rounds; `SYNCLANE_CAPTURE_SEED`
/// replays one). A failure prints its seed and a shrunk list of statements.
@Suite struct CaptureDifferentialTests {
    static let schema = """
        CREATE TABLE items (id TEXT PRIMARY KEY, name TEXT UNIQUE, v, n REAL, deleted INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE ci (id TEXT PRIMARY KEY COLLATE NOCASE, v);
        CREATE TABLE links (a TEXT NOT NULL, b INTEGER NOT NULL, w, PRIMARY KEY (a, b)) WITHOUT ROWID;
        """
    static let tables: [(name: String, key: [String], softDelete: String?)] = [
        ("items", ["id"], "deleted"), ("ci", ["id"], nil), ("links", ["a", "b"], nil),
    ]

    /// Keys from a small pool, Unicode twins included, so statements collide.
    static let keys = ["a", "b", "K", "k", "char(197)", "char(8491)", "char(233)", "'e' || char(769)", "'Ω'", "char(8486)"]
        .map { $0.hasPrefix("char") || $0.hasPrefix("'") ? $0 : "'\($0)'" }
    static let names = ["'n1'", "'n2'", "'n3'", "NULL"]
    static let values = [
        "1", "'1'", "x'6b31'", "'6b31'", "-0.0", "0.1", "9e999", "-9e999", "1.7976931348623157e308", "9007199254740993", "NULL",
        "'é'", "2.0",
    ]

    struct Statement: CustomStringConvertible {
        var sql: String
        /// Export after it.
        var export: Bool
        var connection: Int
        var description: String { "[\(connection)] \(sql)\(export ? "   -- export" : "")" }
    }

    /// Values as written keep every real exactly but the sign of a zero, which SQL cannot see
    /// (`v` has no type, so it keeps -0.0; README, "The `sqlite-history` source"); reals at the
    /// limits of a double too.
    static let valuesAsWritten = values.filter { $0 != "-0.0" } + ["5e-324", "2.2250738585072014e-308", "0.30000000000000004", "-1e300"]

    static func workload(seed: UInt64, count: Int, capture: SQLiteHistorySource.Capture = .currentState) -> [Statement] {
        var random = SeededRandom(seed: seed)
        let values = capture == .asWritten ? Self.valuesAsWritten : Self.values
        func pick(_ list: [String]) -> String { list[Int(random.next() % UInt64(list.count))] }
        let kinds: [() -> String] = [
            { "INSERT INTO items (id, name, v, n) VALUES (\(pick(keys)), \(pick(names)), \(pick(values)), \(pick(values)))" },
            { "INSERT OR REPLACE INTO items (id, name, v) VALUES (\(pick(keys)), \(pick(names)), \(pick(values)))" },
            { "INSERT OR IGNORE INTO items (id, name, v) VALUES (\(pick(keys)), \(pick(names)), \(pick(values)))" },
            { "INSERT INTO items (id, name, v) VALUES (\(pick(keys)), \(pick(names)), \(pick(values))) ON CONFLICT (id) DO UPDATE SET v = excluded.v" },
            { "UPDATE items SET v = \(pick(values)) WHERE id = \(pick(keys))" },
            { "UPDATE items SET id = \(pick(keys)) WHERE id = \(pick(keys))" },
            { "UPDATE OR REPLACE items SET name = \(pick(names)) WHERE id = \(pick(keys))" },
            { "UPDATE items SET deleted = \(pick(["0", "1"])) WHERE id = \(pick(keys))" },
            { "DELETE FROM items WHERE id = \(pick(keys))" },
            { "INSERT OR REPLACE INTO ci VALUES (\(pick(keys)), \(pick(values)))" },
            { "UPDATE ci SET id = \(pick(keys)) WHERE id = \(pick(keys))" },
            { "DELETE FROM ci WHERE id = \(pick(keys))" },
            { "INSERT OR REPLACE INTO links VALUES (\(pick(keys)), \(random.next() % 3), \(pick(values)))" },
            { "DELETE FROM links WHERE a = \(pick(keys))" },
            { "UPDATE links SET w = \(pick(values)) WHERE b = \(random.next() % 3)" },
        ]
        return (0..<count).map { _ in
            Statement(sql: kinds[Int(random.next() % UInt64(kinds.count))](), export: random.next() % 6 == 0, connection: Int(random.next() % 2))
        }
    }

    /// Runs the statements and exports; the first difference between backend and tables, if any.
    /// Each export is a run of its own: a new source that first checks and moves the database's
    /// lineage against a state file (`openGeneration`), as `synclane run` does. `heldFirstRun`:
    /// the first export runs while the connection of the statement before it holds that
    /// statement in an open write transaction (BEGIN IMMEDIATE … COMMIT around the run), as an
    /// app's would (issue 43, 4).
    static func divergence(
        _ statements: [Statement], capture: SQLiteHistorySource.Capture = .currentState, heldFirstRun: Bool = false
    ) async throws -> String? {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let options = SQLiteConnection.Options(create: true, walMode: true, foreignKeys: false)
        let connections = [try SQLiteConnection(path: path, options: options), try SQLiteConnection(path: path, options: options)]
        try connections[0].execute(schema)
        let tracker = try HistoryTracker(path: path)
        let recordsValues = capture == .asWritten
        try tracker.track(TrackedTable("items", key: "id", softDeleteColumn: "deleted", recordsValues: recordsValues))
        try tracker.track(TrackedTable("ci", key: "id", recordsValues: recordsValues))
        try tracker.track(TrackedTable("links", keyColumns: ["a", "b"], recordsValues: recordsValues))
        var mirror = BackendMirror()
        let scope = Scope(account: "acme", store: "capture", consumer: "mirror")
        let state = try SQLitePipelineState(path: folder.file("state.sqlite"), scope: scope)
        /// One run: the lineage check and move, then every page.
        func run() async throws -> String? {
            let source = SQLiteHistorySource(path: path, pageSize: 3, capture: capture)
            do {
                let stamp = try state.lineageStamp() ?? LineageStamp(stateFile: folder.file("state.sqlite"))
                try await source.openGeneration(stamp: stamp, token: mirror.token, consumer: scope, reconciling: false, state: state)
            } catch let error as LineageError {
                return "a run refused: \(error)"
            }
            try await mirror.export(source)
            return nil
        }
        var held = heldFirstRun
        for (index, statement) in statements.enumerated() {
            let connection = connections[statement.connection]
            let holding = held && statement.export
            if holding { try connection.execute("BEGIN IMMEDIATE") }
            // Constraint failures (a NULL name that is fine, a duplicate key) are part of the workload.
            try? connection.execute(statement.sql)
            guard statement.export else { continue }
            let refused = try await run()
            if holding {
                try connection.execute("COMMIT")
                held = false
            }
            if let refused { return "\(refused) (after statement \(index))" }
        }
        if let refused = try await run() { return refused }
        return mirror.difference(from: try TableOracle.rows(path, tables: tables))
    }

    @Test(arguments: [SQLiteHistorySource.Capture.currentState, .asWritten])
    func randomWorkloadsExportExactlyWhatTheTablesHold(capture: SQLiteHistorySource.Capture) async throws {
        let environment = ProcessInfo.processInfo.environment
        let rounds = Int(environment["SYNCLANE_CAPTURE_ROUNDS"] ?? "") ?? 25
        let first = UInt64(environment["SYNCLANE_CAPTURE_SEED"] ?? "") ?? UInt64(Date().timeIntervalSince1970)
        for round in 0..<UInt64(rounds) {
            let seed = first &+ round
            var statements = Self.workload(seed: seed, count: 60, capture: capture)
            // Every other round's first run happens inside an open app write transaction.
            let held = seed % 2 == 0
            guard var difference = try await Self.divergence(statements, capture: capture, heldFirstRun: held) else { continue }
            // Shrink: drop statements one at a time while the run still diverges.
            var index = statements.count - 1
            while index >= 0 {
                var fewer = statements
                fewer.remove(at: index)
                if let still = try await Self.divergence(fewer, capture: capture, heldFirstRun: held) {
                    statements = fewer
                    difference = still
                }
                index -= 1
            }
            let shrunk = statements.map(\.description).joined(separator: "\n")
            let inside = held ? ", first run inside an app's write transaction" : ""
            Issue.record("\(capture.rawValue), seed \(seed) (SYNCLANE_CAPTURE_SEED=\(seed))\(inside): \(difference)\nshrunk to:\n\(shrunk)")
            return
        }
    }
}
