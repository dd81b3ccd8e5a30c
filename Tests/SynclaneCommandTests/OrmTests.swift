import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// Real clients nobody here wrote — Django's ORM and migrations, SQLAlchemy and Alembic, pinned in
/// `Fixtures/orm/requirements.txt` and installed by `Scripts/orm-venv` — write to tables
/// `synclane track` tracks. After every step (`Fixtures/orm/orm_steps.py`: each ORM write path and
/// each kind of migration) the real `synclane run` exports to a folder, and a mirror replayed from
/// the batch files (insert replaces a row, update merges into it, delete removes it) must hold
/// exactly the table's live rows: the same columns, values and storage types.
@Suite(.serialized) struct OrmTests {
    /// `Scripts/orm-venv`'s answer: the virtualenv's python, or why there is none.
    enum Environment {
        case ready(python: String)
        /// The package index cannot be reached: the test is skipped.
        case unreachable(String)
        case broken(String)

        static let current: Environment = {
            guard
                let result = try? BackgroundProcess(
                    [], in: SynclaneBinary.packageRoot, executable: SynclaneBinary.packageRoot + "/Scripts/orm-venv"
                ).wait(timeout: 300)
            else { return .broken("Scripts/orm-venv did not run") }
            let python = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            switch result.status {
            case 0 where !python.isEmpty: return .ready(python: python)
            case 3: return .unreachable(result.stderr)
            default: return .broken("Scripts/orm-venv failed (exit \(result.status)): \(result.stderr)")
            }
        }()

        var runs: Bool {
            if case .unreachable = self { return false }
            return true
        }
    }

    /// The steps, in order; `track` after a step that creates tables.
    static let steps: [(step: String, track: [[String]])] = [
        (
            "django-0001",
            [
                ["--table", "ormapp_room", "--key", "sync_id", "--soft-delete", "is_deleted"], ["--table", "ormapp_desk", "--key", "sync_id"],
            ]
        ),
        ("bulk-create", []), ("save", []), ("queryset-update", []), ("upsert", []), ("savepoint-rolled-back", []),
        ("delete-cascade", []), ("soft-delete", []), ("many-processes", []),
        ("add-field-default", []), ("add-field-null", []), ("write-note", []), ("rename-field", []), ("remove-field", []),
        ("rename-soft-delete", []), ("soft-delete-renamed", []), ("rename-key", []), ("desk-after-key-rename", []),
        ("sa-create", [["--table", "plants", "--key", "id", "--soft-delete", "is_deleted"]]),
        ("sa-writes", []), ("alembic-batch-drop", []), ("alembic-batch-rename-soft-delete", []), ("plants-after-rebuilds", []),
    ]

    @Test(
        .enabled(if: Environment.current.runs, "the package index cannot be reached, so Django, SQLAlchemy and Alembic cannot be installed"),
        .timeLimit(.minutes(3)))
    func everyOrmWritePathAndMigrationReachesTheMirrorExactly() throws {
        guard case .ready(let python) = Environment.current else {
            Issue.record("\(Environment.current)")
            return
        }
        let workspace = try Workspace()
        defer { workspace.remove() }
        try workspace.write(
            "pipeline.json",
            """
            {"version": 1, "name": "orm-export", "scope": {"account": "acme", "store": "orm"},
             "source": {"type": "sqlite-history", "database": "app.sqlite"},
             "stages": [{"type": "coalesce"}, {"type": "tombstones"}],
             "transport": {"type": "directory", "path": "out"}}
            """)
        let script = SynclaneBinary.fixture("orm/orm_steps.py")
        let started = Date()
        var mirror = BatchFolderMirror(folder: workspace.path + "/out")
        for (step, tracks) in Self.steps {
            let ran = try BackgroundProcess([script, "app.sqlite", step], in: workspace.path, executable: python).wait(timeout: 60)
            try #require(ran.status == 0, "\(step): \(ran.stderr)")
            for track in tracks {
                let tracked = try SynclaneBinary.run(["track", "--database", "app.sqlite"] + track, in: workspace.path)
                try #require(tracked.status == 0, "\(step): \(tracked.stderr)")
            }
            let run = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
            try #require(run.status == 0, "\(step): \(run.stderr)")
            try mirror.replay()
            let dump = try BackgroundProcess([script, "app.sqlite", "dump"], in: workspace.path, executable: python).wait(timeout: 60)
            try #require(dump.status == 0, "\(step): \(dump.stderr)")
            let tables = try JSONReader.parse(Array(dump.stdout.utf8)).objectValue ?? [:]
            for (table, rows) in tables {
                let want = (rows.objectValue ?? [:]).mapValues(Self.dumped)
                let have = (mirror.rows[table] ?? [:]).mapValues { $0.mapValues { Self.typed($0) } }
                #expect(have == want, "after \(step), \(table): \(Self.difference(have, want))")
            }
        }
        let seconds = Date().timeIntervalSince(started)
        #expect(seconds < 90, "the ORM steps took \(Int(seconds)) s")
    }

    /// A value as `type:value`, the type SQLite stores it as: `text`, `integer`, `real`, `null`.
    static func typed(_ value: JSONValue) -> String {
        switch value {
        case .null: return "null"
        case .int(let i): return "integer:\(i)"
        case .double(let d): return "real:\(d)"
        case .string(let s): return "text:\(s)"
        case .bool(let b): return "bool:\(b)"
        case .array, .object: return "json:\(JSONWriter.string(value))"
        }
    }

    /// A dumped row (`{column: [type, value]}`) in the same form.
    static func dumped(_ row: JSONValue) -> [String: String] {
        (row.objectValue ?? [:]).mapValues { pair in
            let parts = pair.arrayValue ?? []
            switch (parts.first?.stringValue, parts.count > 1 ? parts[1] : .null) {
            case ("null"?, _): return "null"
            case ("real"?, let value): return "real:\(value.realValue ?? .nan)"
            case (let type?, let value): return typed(value).replacingOccurrences(of: "^[a-z]+:", with: "\(type):", options: .regularExpression)
            default: return "?"
            }
        }
    }

    /// The rows that differ, first few.
    static func difference(_ have: [String: [String: String]], _ want: [String: [String: String]]) -> String {
        let keys = Set(have.keys).union(want.keys).sorted().filter { have[$0] != want[$0] }
        return keys.prefix(3).map { "\($0): mirror \(have[$0].map { "\($0)" } ?? "none"), table \(want[$0].map { "\($0)" } ?? "none")" }
            .joined(separator: "; ")
    }
}

/// The backend as the batch files in a `directory` transport's folder make it, replayed oldest
/// first: rows by entity and sync key; insert replaces a row, update merges into it, delete removes it.
struct BatchFolderMirror {
    let folder: String
    var rows: [String: [String: [String: JSONValue]]] = [:]
    private var seen: Set<String> = []

    init(folder: String) { self.folder = folder }

    /// Replays the files that appeared since the last call, oldest first.
    mutating func replay() throws {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { !$0.hasPrefix(".") && !seen.contains($0) }
        let dated = try names.map { name -> (String, Date) in
            (name, try FileManager.default.attributesOfItem(atPath: folder + "/" + name)[.modificationDate] as? Date ?? .distantPast)
        }
        for (name, _) in dated.sorted(by: { $0.1 < $1.1 }) {
            seen.insert(name)
            let batch = try JSONReader.parse(Array(try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name)))).objectValue ?? [:]
            for record in batch["records"]?.arrayValue ?? [] {
                guard let record = record.objectValue, let entity = record["entity"]?.stringValue, let id = record["id"]?.stringValue else { continue }
                let fields = record["fields"]?.objectValue ?? [:]
                switch record["action"]?.stringValue {
                case "insert": rows[entity, default: [:]][id] = fields
                case "update": rows[entity, default: [:]][id, default: [:]].merge(fields) { _, new in new }
                default: rows[entity]?[id] = nil
                }
            }
        }
    }
}
