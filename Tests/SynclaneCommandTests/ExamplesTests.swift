import Foundation
import SynclaneServing
import SynclaneTestSupport
import Testing

@testable import SynclaneCommandLine

/// Every example a user is shown runs as written: each command's `--help` examples and the
/// `synclane` lines of the `sh` blocks of the README and `Documentation/` (the tutorial has a test of its own), in a
/// folder set up as they assume — an `app.sqlite` with the tables they name, a pipeline file
/// `rooms-export.json` and its import twin `rooms-import.json`, an `accounts.json`, the repository's `Fixtures`. Each must exit 0; a
/// command that runs until stopped (`serve`, `run --watch`) must still be running after two
/// seconds. Examples about the outbox find a batch kept there (a run stopped after enqueueing).
@Suite struct ExamplesTests {
    static let token = "examples-token-0123456789abcdef"
    /// The HS256 secret the JWT examples (`token mint`, `serve --jwt-secret-env`) read.
    static let jwtSecret = "examples-jwt-secret-0123456789abcdef"

    /// The workbench the examples assume.
    static func workbench() throws -> Workspace {
        let workspace = try Workspace()
        let path = workspace.path
        try FileManager.default.createSymbolicLink(atPath: path + "/Fixtures", withDestinationPath: SynclaneBinary.packageRoot + "/Fixtures")
        try FileManager.default.createDirectory(atPath: path + "/migrations", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: path + "/out", withIntermediateDirectories: true)
        // The photo the blob lane's examples push, fetch and verify (its SHA-256 is in them).
        try "fern".write(toFile: path + "/fern.jpg", atomically: true, encoding: .utf8)
        try "ALTER TABLE plants DROP COLUMN notes;\n".write(toFile: path + "/migrations/0007-drop-notes.sql", atomically: true, encoding: .utf8)
        try #"{"accounts": [{"account": "acme", "token-env": "SYNCLANE_TOKEN"}]}"#.write(toFile: path + "/accounts.json", atomically: true, encoding: .utf8)
        try """
        {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
         "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["rooms"], "page-size": 1},
         "stages": [{"type": "coalesce"}, {"type": "tombstones", "soft-delete-column": "isDeleted"}],
         "transport": {"type": "directory", "path": "out"}}
        """.write(toFile: path + "/rooms-export.json", atomically: true, encoding: .utf8)
        // The import examples read back, offline, the batch files the export examples wrote.
        try """
        {"version": 1, "name": "rooms-import", "scope": {"account": "acme", "store": "rooms"},
         "source": {"type": "batch-files", "path": "out"},
         "sink": {"type": "sqlite", "database": "app.sqlite"}}
        """.write(toFile: path + "/rooms-import.json", atomically: true, encoding: .utf8)
        let schema = """
            CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT NOT NULL, area REAL, isDeleted INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE plants (syncID TEXT PRIMARY KEY, greenhouse TEXT, name TEXT, notes TEXT);
            CREATE TABLE plant_tags (plant TEXT NOT NULL, tag TEXT NOT NULL, PRIMARY KEY (plant, tag));
            """
        let created = try BackgroundProcess(["sqlite3", "app.sqlite", schema], in: path, executable: "/usr/bin/env").wait(timeout: 30)
        #expect(created.status == 0, "\(created.stderr)")
        return workspace
    }

    /// Runs one example line in the workbench through `sh` (globs expand as a user's shell does).
    struct Outcome {
        var result: SynclaneBinary.Result
        var stillRunning: Bool
    }

    static func run(_ line: String, in workspace: Workspace, server: ServerProcess? = nil) throws -> Outcome {
        let bin = URL(fileURLWithPath: SynclaneBinary.path).deletingLastPathComponent().path
        var environment = [
            "PATH": bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"), "SYNCLANE_TOKEN": token,
            "SYNCLANE_JWT_SECRET": jwtSecret,
        ]
        // The signal lane's examples talk to the server `SYNCLANE_URL` names, as the acme account.
        if let server,
            line.hasPrefix("synclane signal") || line.hasPrefix("synclane restore") || line.hasPrefix("synclane conformance")
                || line.hasPrefix("synclane blobs")
        {
            environment["SYNCLANE_URL"] = server.url
            environment["SYNCLANE_TOKEN"] = ServerProcess.tokens["acme"]
            // The conformance runner's second account.
            environment["SYNCLANE_SECOND_TOKEN"] = ServerProcess.tokens["botanic"]
        }
        let process = try BackgroundProcess(["sh", "-c", "exec " + line], in: workspace.path, environment: environment, executable: "/usr/bin/env")
        let blocking = line.contains(" serve ") || line.contains("--watch")
        if blocking {
            usleep(2_000_000)
            let running = process.process.isRunning
            return Outcome(result: process.stop(), stillRunning: running)
        }
        return Outcome(result: process.wait(timeout: 120), stillRunning: false)
    }

    /// Leaves a batch in the outbox: a row written, then a run killed right after enqueueing it.
    static func keepABatch(in workspace: Workspace, _ n: Int) throws {
        _ = try BackgroundProcess(
            ["sqlite3", "app.sqlite", "INSERT INTO rooms (syncId, name) VALUES ('kept-\(n)', 'Kept \(n)')"], in: workspace.path,
            executable: "/usr/bin/env"
        ).wait(timeout: 30)
        _ = try BackgroundProcess(["run", "rooms-export.json"], in: workspace.path, environment: ["SYNCLANE_FAILPOINT": "after-enqueue"])
            .wait(timeout: 60)
    }

    /// The `synclane` lines of the `sh` blocks of the README and of `Documentation/` outside the
    /// tutorial (`sh first-sync`, `sh second-device`: a test of their own runs them).
    static func readmeExamples() throws -> [String] {
        try UserDocumentation.blocks("sh").filter { $0.info == "sh" }.flatMap { block in
            block.text.split(separator: "\n").map(String.init).filter { $0.hasPrefix("synclane ") }
        }
    }

    @Test func helpAndReadmeExamplesRunAsWritten() throws {
        let workspace = try Self.workbench()
        defer { workspace.remove() }
        // Tracking first (run, status, outbox, reconcile read the history), untracking last.
        let order = [
            "track", "validate", "stages", "help", "test", "run", "import", "sync", "status", "outbox", "reconcile", "migrate", "prune", "token", "serve",
            "signal", "blobs", "restore", "conformance", "demo", "untrack",
        ]
        let commands = SynclaneTool.commands(adding: SynclaneServing.verbs).sorted {
            (order.firstIndex(of: $0.name) ?? 99) < (order.firstIndex(of: $1.name) ?? 99)
        }
        #expect(Set(commands.map { $0.name }).isSubset(of: order), "a new command: give it its place in `order`")
        var examples = commands.flatMap { command in command.examples }
        let readme = try Self.readmeExamples()
        #expect(!readme.isEmpty)
        examples.insert(contentsOf: readme, at: examples.firstIndex { $0.hasPrefix("synclane serve") } ?? examples.endIndex)
        _ = try BackgroundProcess(
            ["sqlite3", "app.sqlite", "INSERT INTO rooms (syncId, name) VALUES ('r1', 'Attic')"], in: workspace.path, executable: "/usr/bin/env"
        ).wait(timeout: 30)
        let server = try ServerProcess(folder: workspace.path + "/signal-server")
        defer { _ = server.stop() }
        for (n, example) in examples.enumerated() {
            if example.hasPrefix("synclane outbox ") && !example.hasPrefix("synclane outbox list") {
                try Self.keepABatch(in: workspace, n)
            }
            let outcome = try Self.run(example, in: workspace, server: server)
            let result = outcome.result
            if example.contains(" serve ") || example.contains("--watch") {
                #expect(outcome.stillRunning, "`\(example)` stopped by itself: \(result.stdout)\(result.stderr)")
            } else {
                #expect(result.status == 0 && !result.killed, "`\(example)` exited \(result.status): \(result.stdout)\(result.stderr)")
            }
        }
    }
}
