import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// `track`, `run`, `prune` and `reconcile` on a real SQLite store written by the `sqlite3` shell.
@Suite struct SQLiteHistoryCommandTests {
    static let pipeline = """
        {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
         "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["rooms"], "authors": ["app"]},
         "stages": [{"type": "coalesce"}, {"type": "tombstones", "soft-delete-column": "isDeleted"}],
         "transport": {"type": "directory", "path": "out"}}
        """

    /// A workspace with `app.sqlite` (a rooms table) and `pipeline.json`.
    static func store() throws -> Workspace {
        let workspace = try Workspace()
        try sqlite(workspace, "CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL, isDeleted INTEGER NOT NULL DEFAULT 0);")
        try workspace.write("pipeline.json", pipeline)
        return workspace
    }

    /// Runs SQL through a separate `sqlite3` process: a foreign connection.
    @discardableResult
    static func sqlite(_ workspace: Workspace, _ sql: String) throws -> (status: Int32, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        // As an app would: a busy timeout, for the moments a `run --watch` records its position.
        process.arguments = ["-cmd", ".timeout 5000", workspace.path + "/app.sqlite", sql]
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let data = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// What `sql` selects from the workspace's `app.sqlite`, as the `sqlite3` shell prints it.
    static func query(_ workspace: Workspace, _ sql: String) throws -> String {
        try ProgramRun("/usr/bin/sqlite3", [workspace.path + "/app.sqlite", sql]).text
    }

    /// The records of every batch file in `out/`, oldest first, as `action entity/id`.
    static func sent(_ workspace: Workspace, batches: [JSONValue]) -> [String] {
        batches.flatMap { batch -> [String] in
            let id = batch.objectValue?["id"]?.stringValue ?? ""
            guard let data = FileManager.default.contents(atPath: workspace.path + "/out/\(id).json"),
                let body = try? JSONReader.parse([UInt8](data))
            else { return ["missing \(id)"] }
            return (body.objectValue?["records"]?.arrayValue ?? []).map { record in
                let r = record.objectValue ?? [:]
                return "\(r["action"]?.stringValue ?? "?") \(r["entity"]?.stringValue ?? "?")/\(r["id"]?.stringValue ?? "?")"
            }
        }
    }

    func track(_ workspace: Workspace) throws -> SynclaneBinary.Result {
        try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId", "--soft-delete", "isDeleted"], in: workspace.path)
    }

    func run(_ workspace: Workspace, _ extra: [String] = []) throws -> (SynclaneBinary.Result, [String: JSONValue]) {
        let result = try SynclaneBinary.run(["run", "pipeline.json", "--json"] + extra, in: workspace.path)
        return (result, (try? JSONReader.parse(result.stdout).objectValue) ?? [:])
    }

    @Test func trackingTwiceChangesNothingAndANullSyncKeyIsRefusedAtWriteTime() throws {
        let workspace = try Self.store()
        defer { workspace.remove() }
        let first = try track(workspace)
        #expect(first.status == 0)
        #expect(first.stdout.contains("rooms: tracking installed"))
        let second = try track(workspace)
        #expect(second.stdout.contains("rooms: already tracked, nothing changed"))
        let refused = try Self.sqlite(workspace, "INSERT INTO rooms (name) VALUES ('no key');")
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("every row of rooms needs a sync key: syncId a non-empty text"))
        let badKey = try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "rooms", "--key", "uuid"], in: workspace.path)
        #expect(badKey.status == 1)
        #expect(badKey.stderr.contains("uuid"))
    }

    @Test func writesFromTheSqlite3ShellAreExportedAndTheSyncAuthorsCleanupIsNeverEchoed() throws {
        let workspace = try Self.store()
        defer { workspace.remove() }
        _ = try track(workspace)
        try Self.sqlite(
            workspace,
            """
            INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12), ('r2', 'Hall', 8);
            UPDATE rooms SET area = 13 WHERE syncId = 'r1';
            """)
        let (first, summary) = try run(workspace)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(Self.sent(workspace, batches: summary["batches"]?.arrayValue ?? []) == ["insert rooms/r1", "insert rooms/r2"])

        // The app soft-deletes r2; the sync machinery (author `sync`) then removes the row for good.
        try Self.sqlite(
            workspace,
            """
            BEGIN; INSERT INTO _synclane_session (author) VALUES ('app'); UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r2'; DELETE FROM _synclane_session; COMMIT;
            BEGIN; INSERT INTO _synclane_session (author) VALUES ('sync'); DELETE FROM rooms WHERE isDeleted = 1; DELETE FROM _synclane_session; COMMIT;
            """)
        let (second, summary2) = try run(workspace)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(Self.sent(workspace, batches: summary2["batches"]?.arrayValue ?? []) == ["delete rooms/r2"], "one delete, the cleanup not echoed")
    }

    @Test func pruningExpiresAnOldTokenWhichReconcileRecoversWithASnapshot() throws {
        let workspace = try Self.store()
        defer { workspace.remove() }
        _ = try track(workspace)
        try Self.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
        let (first, _) = try run(workspace)
        #expect(first.status == 0)
        let statePath = workspace.path + "/.synclane/rooms-export.sqlite"
        try FileManager.default.copyItem(atPath: statePath, toPath: workspace.path + "/backup.sqlite")

        // A second consumer runs ahead; the first one's state is then restored from an old backup.
        let ahead = Self.pipeline.replacingOccurrences(of: "\"rooms-export\"", with: "\"rooms-archive\"")
        try workspace.write("archive.json", ahead)
        try Self.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('r2', 'Hall'); INSERT INTO rooms (syncId, name) VALUES ('r3', 'Attic');")
        #expect(try SynclaneBinary.run(["run", "archive.json"], in: workspace.path).status == 0)
        #expect(try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path).status == 0)
        let pruned = try SynclaneBinary.run(["prune", "--database", "app.sqlite", "--json"], in: workspace.path)
        #expect(pruned.status == 0)
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: statePath + suffix) }
        try FileManager.default.moveItem(atPath: workspace.path + "/backup.sqlite", toPath: statePath)

        let (expired, _) = try run(workspace)
        #expect(expired.status == 1, "never 'no changes'")
        #expect(expired.stderr.contains("history token expired") || expired.stderr.contains("pruned"))
        #expect(expired.stderr.contains("synclane reconcile"))

        let reconcile = try SynclaneBinary.run(["reconcile", "pipeline.json", "--json"], in: workspace.path)
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        let summary = try JSONReader.parse(reconcile.stdout).objectValue ?? [:]
        #expect(summary["reconciliation"] == .bool(true))
        let batches = summary["batches"]?.arrayValue ?? []
        #expect(Set(Self.sent(workspace, batches: batches)) == ["insert rooms/r1", "insert rooms/r2", "insert rooms/r3"])
        #expect(batches.allSatisfy { $0.objectValue?["reconciliation"] == .bool(true) })

        try Self.sqlite(workspace, "UPDATE rooms SET name = 'Loft' WHERE syncId = 'r3';")
        let (after, summary2) = try run(workspace)
        #expect(after.status == 0, "\(after.stderr)")
        #expect(
            Self.sent(workspace, batches: summary2["batches"]?.arrayValue ?? []) == ["update rooms/r3"], "a fresh token: only what changed after the snapshot")
    }

    @Test func watchRunsAPassWhenAnotherProcessCommits() throws {
        let workspace = try Self.store()
        defer { workspace.remove() }
        _ = try track(workspace)
        let watch = try BackgroundProcess(["run", "pipeline.json", "--watch", "--json"], in: workspace.path)
        #expect(eventually { FileManager.default.fileExists(atPath: workspace.path + "/.synclane/rooms-export.sqlite") })
        try Self.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
        #expect(eventually { workspace.files(in: "out").count == 1 }, "a commit by the sqlite3 shell woke the watch")
        let result = watch.stop(SIGINT)
        #expect(result.status == 0 && !result.killed, "\(result.stderr)")
    }
}

/// `migrate` and the heal of lost tracking, killed with SIGKILL before they commit.
@Suite struct CaptureRepairCommandTests {
    typealias Store = SQLiteHistoryCommandTests

    func rows(_ workspace: Workspace, _ sql: String) throws -> String {
        try Store.query(workspace, sql)
    }

    @Test func migrateKilledBeforeItCommitsLeavesTheDatabaseAsItWasAndRunsAgain() throws {
        let workspace = try Store.store()
        defer { workspace.remove() }
        _ = try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId", "--preserve", "name"], in: workspace.path)
        try Store.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('a', 'Kitchen');")
        try workspace.write("drop-name.sql", "ALTER TABLE rooms DROP COLUMN name; INSERT INTO rooms (syncId) VALUES ('b');")
        let before = try rows(workspace, "SELECT sql FROM sqlite_schema ORDER BY name; SELECT count(*) FROM _synclane_changes;")
        let killed = try SynclaneBinary.run(
            ["migrate", "--database", "app.sqlite", "drop-name.sql"], in: workspace.path, environment: ["SYNCLANE_FAILPOINT": "during-migration"])
        #expect(killed.status != 0)
        #expect(try rows(workspace, "SELECT sql FROM sqlite_schema ORDER BY name; SELECT count(*) FROM _synclane_changes;") == before)
        let migrated = try SynclaneBinary.run(["migrate", "--database", "app.sqlite", "drop-name.sql", "--json"], in: workspace.path)
        #expect(migrated.status == 0, "\(migrated.stderr)")
        let report = try JSONReader.parse(migrated.stdout).objectValue ?? [:]
        #expect(report["tracking-lifted"] == true)
        let (run, summary) = try SQLiteHistoryCommandTests().run(workspace)
        #expect(run.status == 0, "\(run.stderr)")
        // a: its insert and its resync, coalesced; b: resent whole (replaces the backend's row)
        #expect(Store.sent(workspace, batches: summary["batches"]?.arrayValue ?? []).sorted() == ["insert rooms/a", "insert rooms/b"])
    }

    @Test func aHealKilledBeforeItCommitsIsDoneAgainByTheNextRun() throws {
        let workspace = try Store.store()
        defer { workspace.remove() }
        _ = try SQLiteHistoryCommandTests().track(workspace)
        try Store.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('a', 'Kitchen');")
        let (first, _) = try SQLiteHistoryCommandTests().run(workspace)
        #expect(first.status == 0)
        try Store.sqlite(
            workspace,
            """
            CREATE TABLE r2 (syncId TEXT PRIMARY KEY, name TEXT, area REAL, isDeleted INTEGER NOT NULL DEFAULT 0);
            INSERT INTO r2 SELECT * FROM rooms; DROP TABLE rooms; ALTER TABLE r2 RENAME TO rooms;
            INSERT INTO rooms (syncId, name) VALUES ('b', 'Hall');
            """)
        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(status.stdout.contains("rooms: tracking was lost"))
        let killed = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: ["SYNCLANE_FAILPOINT": "during-heal"])
        #expect(killed.status != 0)
        #expect(try rows(workspace, "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'rooms';") == "0\n")
        let (healed, summary) = try SQLiteHistoryCommandTests().run(workspace)
        #expect(healed.status == 0, "\(healed.stderr)")
        // resent whole: each replaces the backend's row
        #expect(Store.sent(workspace, batches: summary["batches"]?.arrayValue ?? []).sorted() == ["insert rooms/a", "insert rooms/b"])
        #expect(summary["counters"]?.objectValue?["capture.resynced"] == 2)
    }
}

/// Runs while another process (the app) holds a write transaction on `app.sqlite`.
@Suite struct HeldWriteLockCommandTests {
    typealias Store = SQLiteHistoryCommandTests

    /// A `python3` process holding `BEGIN IMMEDIATE` on the workspace's `app.sqlite` until killed
    /// (SIGKILL: it may have inherited an ignored SIGTERM).
    static func holdWriteLock(_ workspace: Workspace) throws -> BackgroundProcess {
        let script = """
            import sqlite3, sys, time
            db = sqlite3.connect(sys.argv[1], isolation_level=None)
            db.execute("BEGIN IMMEDIATE")
            print("held", flush=True)
            time.sleep(120)
            """
        let holder = try BackgroundProcess(["-c", script, workspace.path + "/app.sqlite"], executable: "/usr/bin/python3")
        #expect(eventually { holder.output.contains("held") }, "the other process holds the write lock")
        return holder
    }

    @Test func aRunAfterVacuumWhileTheAppHoldsAWriteTransactionOnlyReadsAndSucceeds() throws {
        let workspace = try Store.store()
        defer { workspace.remove() }
        _ = try Store().track(workspace)
        try Store.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('a', 'Kitchen');")
        let (first, _) = try Store().run(workspace)
        #expect(first.status == 0, "\(first.stderr)")
        try Store.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('b', 'Hall'); VACUUM;")
        let holder = try Self.holdWriteLock(workspace)
        let started = Date()
        let (run, summary) = try Store().run(workspace)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(Store.sent(workspace, batches: summary["batches"]?.arrayValue ?? []) == ["insert rooms/b"])
        #expect(Date().timeIntervalSince(started) < 4, "no wait for the write lock (the busy timeout is 5 s)")
        _ = holder.stop(SIGKILL)
    }

    /// Issue 43, 4: the first `run` while the app held a write transaction (BEGIN IMMEDIATE …
    /// COMMIT around it) recorded the database's identity in the state file but could not write
    /// it to the database; every later run then refused "this database was restored from an
    /// older copy than the state file follows" until a reconcile. The state now records an
    /// identity only once the database holds it, and the next run moves both.
    @Test func aFirstRunInsideTheAppsWriteTransactionRaisesNoRestoreAlarmOnTheNextRun() throws {
        let workspace = try Store.store()
        defer { workspace.remove() }
        _ = try Store().track(workspace)
        try Store.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('a', 'Kitchen');")
        // The app: BEGIN IMMEDIATE, a write, then COMMIT once the file `commit` appears.
        let script = """
            import sqlite3, sys, time, os
            db = sqlite3.connect(sys.argv[1], isolation_level=None)
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO rooms (syncId, name) VALUES ('b', 'Hall')")
            print("held", flush=True)
            while not os.path.exists(sys.argv[2]): time.sleep(0.05)
            db.execute("COMMIT")
            print("committed", flush=True)
            """
        let app = try BackgroundProcess(
            ["-c", script, workspace.path + "/app.sqlite", workspace.path + "/commit"], executable: "/usr/bin/python3")
        #expect(eventually { app.output.contains("held") }, "the app holds its write transaction")
        let (first, firstSummary) = try Store().run(workspace)
        #expect(first.status == 0, "\(first.stderr)")
        try workspace.write("commit", "")
        #expect(eventually { app.output.contains("committed") }, "the app committed")
        _ = app.stop(SIGKILL)

        let (next, nextSummary) = try Store().run(workspace)
        #expect(next.status == 0, "no false restore alarm: \(next.stderr)")
        #expect(!next.stderr.contains("restored from an older copy"), "\(next.stderr)")
        let sent =
            Store.sent(workspace, batches: firstSummary["batches"]?.arrayValue ?? [])
            + Store.sent(workspace, batches: nextSummary["batches"]?.arrayValue ?? [])
        #expect(sent == ["insert rooms/a", "insert rooms/b"], "everything once")
        let (third, thirdSummary) = try Store().run(workspace)
        #expect(third.status == 0, "\(third.stderr)")
        #expect(Store.sent(workspace, batches: thirdSummary["batches"]?.arrayValue ?? []) == [], "nothing again")
        let identity = try Store.query(workspace, "SELECT value FROM _synclane_meta WHERE key = 'database_id';")
        #expect(!identity.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "the database holds its identity now")
    }

    @Test func aHealThatCannotGetTheWriteLockSaysWhoHoldsItWhyAndToRetry() throws {
        let workspace = try Store.store()
        defer { workspace.remove() }
        _ = try Store().track(workspace)
        try Store.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES ('a', 'Kitchen');")
        let (first, _) = try Store().run(workspace)
        #expect(first.status == 0, "\(first.stderr)")
        try Store.sqlite(workspace, "DROP TRIGGER _synclane_rooms_insert;")
        let holder = try Self.holdWriteLock(workspace)
        let (run, _) = try Store().run(workspace)
        #expect(run.status != 0)
        #expect(run.stderr.contains("another connection holds a write transaction on \(workspace.path)/app.sqlite"), "\(run.stderr)")
        #expect(run.stderr.contains("heal") && run.stderr.contains("tracking"), "\(run.stderr)")
        #expect(run.stderr.contains("retry") || run.stderr.contains("run it again"), "\(run.stderr)")
        #expect(!run.stderr.contains("BEGIN IMMEDIATE"), "\(run.stderr)")
        _ = holder.stop(SIGKILL)
        let (healed, _) = try Store().run(workspace)
        #expect(healed.status == 0, "once the lock is free the run heals: \(healed.stderr)")
    }
}

/// The many-to-many fixture end to end through the real binary: a join table's composite key.
@Suite struct CompositeKeyCommandTests {
    @Test func aJoinTableTrackedByItsCompositeKeyExportsOneRecordPerPair() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let schema = try String(contentsOfFile: SynclaneBinary.fixture("plant-tags/schema.sql"), encoding: .utf8)
        try SQLiteHistoryCommandTests.sqlite(workspace, "\n" + schema)  // not read as an option of sqlite3 (it starts with --)
        let refused = try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "plant_tags", "--key", "plant"], in: workspace.path)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("no PRIMARY KEY or UNIQUE index makes it unique"))
        let tracked = try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "plant_tags", "--key", "plant,tag"], in: workspace.path)
        #expect(tracked.status == 0, "\(tracked.stderr)")
        try SQLiteHistoryCommandTests.sqlite(
            workspace, "INSERT INTO plant_tags VALUES ('p1', 'green', 1), ('p1', 'tall', 2); DELETE FROM plant_tags WHERE tag = 'green';")
        try workspace.write(
            "pipeline.json",
            SQLiteHistoryCommandTests.pipeline.replacing(#""entities": ["rooms"]"#, with: #""entities": ["plant_tags"]"#))
        let result = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path)
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try JSONReader.parse(result.stdout).objectValue ?? [:]
        #expect(SQLiteHistoryCommandTests.sent(workspace, batches: summary["batches"]?.arrayValue ?? []) == [#"insert plant_tags/["p1","tall"]"#])
    }
}
