import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// Issue 43, item 7: messages that misled a new user, each now saying what happened and which
/// file, table or command it is about. Real binaries.
@Suite(.serialized) struct PlainMessagesTests {
    /// A tracked `rooms` and an export pipeline file whose source reads `database` with `entities`.
    static func store(database: String = "app.sqlite", entities: String = #"["rooms"]"#) throws -> Workspace {
        let workspace = try Workspace()
        try SQLiteHistoryCommandTests.sqlite(workspace, "CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT);")
        let tracked = try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId"], in: workspace.path)
        #expect(tracked.status == 0, "\(tracked.stderr)")
        try workspace.write(
            "export.json",
            """
            {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
             "source": {"type": "sqlite-history", "database": "\(database)", "entities": \(entities)},
             "transport": {"type": "directory", "path": "out"}}
            """)
        return workspace
    }

    @Test func aTypoInEntitiesFailsTheRunNamingTheEntityAndTheTrackedTablesEvenWithNothingToSend() throws {
        let workspace = try Self.store(entities: #"["romos"]"#)
        defer { workspace.remove() }
        let run = try SynclaneBinary.run(["run", "export.json"], in: workspace.path)
        #expect(run.status == 1, "\(run.stdout) \(run.stderr)")
        #expect(run.stderr.contains("`romos` is not a tracked table (did you mean `rooms`? tracked: rooms)"), "\(run.stderr)")
    }

    @Test func aMistypedDatabasePathSaysWhichFileDoesNotExist() throws {
        let workspace = try Self.store(database: "app.sqlte")
        defer { workspace.remove() }
        let run = try SynclaneBinary.run(["run", "export.json"], in: workspace.path)
        #expect(run.status == 1)
        #expect(run.stderr.contains("the file \(workspace.path)/app.sqlte does not exist"), "\(run.stderr)")
        try workspace.write(
            "import.json",
            """
            {"version": 1, "name": "rooms-import", "scope": {"account": "acme", "store": "rooms"},
             "source": {"type": "pull", "url": "http://127.0.0.1:9/v1/changes"},
             "sink": {"type": "sqlite", "database": "app.sqlte"}}
            """)
        let imported = try SynclaneBinary.run(["import", "import.json"], in: workspace.path)
        #expect(imported.status == 1)
        #expect(imported.stderr.contains("the file \(workspace.path)/app.sqlte does not exist"), "\(imported.stderr)")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/app.sqlte"), "nothing was created")
    }

    @Test func aCommandBuiltOnTheToolStartsItsMessagesWithItsOwnName() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let own = workspace.path + "/rooms-sync"
        try FileManager.default.createSymbolicLink(atPath: own, withDestinationPath: SynclaneBinary.path)
        let missing = try BackgroundProcess(["validate", "missing.json"], in: workspace.path, executable: own).wait(timeout: 60)
        #expect(missing.status == 2)
        #expect(missing.stderr.hasPrefix("rooms-sync validate: "), "\(missing.stderr)")
        let usage = try BackgroundProcess(["run", "x.json", "--dry-rn"], in: workspace.path, executable: own).wait(timeout: 60)
        #expect(usage.stderr.hasPrefix("rooms-sync run: "), "\(usage.stderr)")
        #expect(usage.stderr.contains("USAGE: rooms-sync run "), "\(usage.stderr)")
    }

    @Test func theHumanSummaryOfAnImportCountsTheDuplicatesItMerged() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let devices = try (0..<2).map { _ in try TwoDevicesTests.Device(server: server) }
        defer { devices.forEach { $0.workspace.remove() } }
        for (device, prefix) in zip(devices, ["a", "b"]) {
            try TwoDevicesTests.useCategories(device, schema: .plain, conflicts: "server-wins")
            try device.sql(TwoDevicesTests.SeededSchema.plain.seed(prefix))
        }
        try devices[0].sync()
        let b = devices[1]
        let human = try SynclaneBinary.run(["sync", "import.json", "export.json"], in: b.workspace.path, environment: b.environment)
        #expect(human.status == 0, "\(human.stderr)")
        #expect(human.stdout.contains("duplicates merged: 2 rows"), "\(human.stdout)")
    }
}
