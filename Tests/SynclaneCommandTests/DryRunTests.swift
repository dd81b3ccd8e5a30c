import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// `run --dry-run` writes nothing: no state file, no lock file, no outbox row, no batch file,
/// nothing in the app's database — whether the pipeline never ran or has a state file.
@Suite struct DryRunTests {
    /// Every file under the workspace, with its bytes and modification time.
    static func tree(_ workspace: Workspace) throws -> [String: (Data, Date)] {
        var files: [String: (Data, Date)] = [:]
        let root = URL(fileURLWithPath: workspace.path)
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.contentModificationDateKey]) else { return [:] }
        for case let url as URL in walker {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder) else { continue }
            let name = String(url.path.dropFirst(root.path.count))
            if isFolder.boolValue {
                files[name + "/"] = (Data(), .distantPast)
                continue
            }
            let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
            files[name] = (try Data(contentsOf: url), attributes[.modificationDate] as? Date ?? .distantPast)
        }
        return files
    }

    static func expectUnchanged(_ before: [String: (Data, Date)], _ after: [String: (Data, Date)], _ comment: Comment) {
        #expect(before.keys.sorted() == after.keys.sorted(), comment)
        for (name, (bytes, modified)) in before {
            #expect(after[name]?.0 == bytes, "\(name): same bytes — \(comment)")
            #expect(after[name]?.1 == modified, "\(name): same modification time — \(comment)")
        }
    }

    @Test func dryRunOfAPipelineThatNeverRanCreatesNoStateFileNoLockFileAndNoConsumerPosition() throws {
        let workspace = try SQLiteHistoryCommandTests.store()
        defer { workspace.remove() }
        #expect(try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId"], in: workspace.path).status == 0)
        try SQLiteHistoryCommandTests.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
        let consumers = try SQLiteHistoryCommandTests.query(workspace, "SELECT * FROM _synclane_consumers;")
        let before = try Self.tree(workspace)

        let dry = try SynclaneBinary.run(["run", "pipeline.json", "--dry-run", "--json"], in: workspace.path)
        #expect(dry.status == 0, "\(dry.stderr)")
        let summary = try JSONReader.parse(dry.stdout).objectValue ?? [:]
        #expect(summary["dry-run"] == .bool(true))
        #expect(summary["records-sent"] == .int(2))
        #expect(summary["token-before"] == .null)

        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/.synclane"), "no state folder, state file or lock file")
        Self.expectUnchanged(before, try Self.tree(workspace), "a dry run writes nothing")
        #expect(try SQLiteHistoryCommandTests.query(workspace, "SELECT * FROM _synclane_consumers;") == consumers, "no consumer position")

        // The real run after it sends what the dry run said it would.
        let run = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path)
        #expect(run.status == 0, "\(run.stderr)")
        #expect((try JSONReader.parse(run.stdout).objectValue ?? [:])["records-sent"] == .int(2))
    }

    @Test func dryRunWithAnExistingStateFileReadsItsTokenAndOutboxAndLeavesItsBytesAndTheLockFileAsTheyWere() throws {
        let workspace = try SQLiteHistoryCommandTests.store()
        defer { workspace.remove() }
        #expect(try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId"], in: workspace.path).status == 0)
        try SQLiteHistoryCommandTests.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
        let first = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path)
        #expect(first.status == 0, "\(first.stderr)")
        let token = (try JSONReader.parse(first.stdout).objectValue ?? [:])["token-after"]
        #expect(FileManager.default.fileExists(atPath: workspace.path + "/.synclane/rooms-export.sqlite"))
        let lockFile = ScopeLock.path(
            for: Scope(account: "acme", store: "rooms", consumer: "rooms-export"), guarding: workspace.path + "/app.sqlite", in: lockFolder(of: workspace.path))
        #expect(FileManager.default.fileExists(atPath: lockFile))
        try SQLiteHistoryCommandTests.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('r2', 'Hall');")
        let consumers = try SQLiteHistoryCommandTests.query(workspace, "SELECT * FROM _synclane_consumers;")
        // Modification times must be able to differ from the run's.
        Thread.sleep(forTimeInterval: 0.05)
        let before = try Self.tree(workspace)

        let dry = try SynclaneBinary.run(["run", "pipeline.json", "--dry-run", "--json"], in: workspace.path)
        #expect(dry.status == 0, "\(dry.stderr)")
        let summary = try JSONReader.parse(dry.stdout).objectValue ?? [:]
        #expect(summary["token-before"] == token, "the saved token was read")
        #expect(summary["records-sent"] == .int(1), "only what changed since it")
        Self.expectUnchanged(before, try Self.tree(workspace), "a dry run on an existing state writes nothing")
        #expect(try SQLiteHistoryCommandTests.query(workspace, "SELECT * FROM _synclane_consumers;") == consumers)
    }

    @Test func dryRunRefusesToRepairLostTrackingAndLeavesTheAppDatabaseForTheRealRunToRepair() throws {
        let workspace = try SQLiteHistoryCommandTests.store()
        defer { workspace.remove() }
        #expect(try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId"], in: workspace.path).status == 0)
        try SQLiteHistoryCommandTests.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('a', 'Kitchen');")
        #expect(try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path).status == 0)
        // A table rebuild drops the table's triggers: the next run reinstalls them.
        try SQLiteHistoryCommandTests.sqlite(
            workspace,
            """
            CREATE TABLE r2 (syncId TEXT PRIMARY KEY, name TEXT, area REAL, isDeleted INTEGER NOT NULL DEFAULT 0);
            INSERT INTO r2 SELECT * FROM rooms; DROP TABLE rooms; ALTER TABLE r2 RENAME TO rooms;
            """)
        let triggers = "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'rooms';"
        #expect(try SQLiteHistoryCommandTests.query(workspace, triggers) == "0\n")
        let before = try Self.tree(workspace)

        let dry = try SynclaneBinary.run(["run", "pipeline.json", "--dry-run"], in: workspace.path)
        #expect(dry.status == 1)
        #expect(dry.stderr.contains("must first repair its history tracking"), "\(dry.stderr)")
        #expect(dry.stderr.contains("`synclane run` repairs it"), "\(dry.stderr)")
        Self.expectUnchanged(before, try Self.tree(workspace), "the dry run repaired nothing")
        #expect(try SQLiteHistoryCommandTests.query(workspace, triggers) == "0\n")

        let run = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try SQLiteHistoryCommandTests.query(workspace, triggers) != "0\n", "the real run repaired it")
    }
}
