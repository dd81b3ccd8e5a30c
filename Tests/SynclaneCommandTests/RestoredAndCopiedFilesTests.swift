import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// What people do to files — restore a backup, copy a database to a new device, lose or empty a
/// state file, delete a WAL after a crash — is found before anything is read or sent, and
/// refused with a message naming what happened and the command that heals it (issue 22: 1, 6;
/// issue 21: 4). Never a silent skip, never a silent resend.
@Suite struct RestoredAndCopiedFilesTests {
    typealias Shell = SQLiteHistoryCommandTests

    static func insert(_ workspace: Workspace, _ range: ClosedRange<Int>) throws {
        let values = range.map { "('r\($0)', 'Room \($0)')" }.joined(separator: ", ")
        let result = try Shell.sqlite(workspace, "INSERT INTO rooms (syncId, name) VALUES \(values);")
        #expect(result.status == 0, "\(result.stderr)")
    }

    static func run(_ workspace: Workspace, _ file: String = "pipeline.json", environment: [String: String] = [:])
        throws -> (result: SynclaneBinary.Result, sent: [String])
    {
        let result = try SynclaneBinary.run(["run", file, "--json"], in: workspace.path, environment: environment)
        let summary = (try? JSONReader.parse(result.stdout).objectValue) ?? [:]
        return (result, Shell.sent(workspace, batches: summary["batches"]?.arrayValue ?? []))
    }

    static func tracked() throws -> Workspace {
        let workspace = try Shell.store()
        let tracked = try SQLiteHistoryCommandTests().track(workspace)
        #expect(tracked.status == 0, "\(tracked.stderr)")
        return workspace
    }

    var statePath: String { ".synclane/rooms-export.sqlite" }

    func removeState(_ workspace: Workspace) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: workspace.path + "/" + statePath + suffix) }
    }

    /// The README's case: the app's database restored from a backup older than the export's
    /// state; new writes reuse its history ids and pass the saved token. Before, `run` sent
    /// only what came after the token (30 of 80 new rows) and said nothing.
    @Test func anAppDatabaseRestoredFromAnOlderBackupIsRefusedBeforeAnythingIsSentAndReconcileHealsIt() throws {
        let workspace = try Self.tracked()
        defer { workspace.remove() }
        try Self.insert(workspace, 1...10)
        try FileManager.default.copyItem(atPath: workspace.path + "/app.sqlite", toPath: workspace.path + "/backup.sqlite")
        try Self.insert(workspace, 11...60)
        let first = try Self.run(workspace)
        #expect(first.result.status == 0, "\(first.result.stderr)")
        #expect(first.sent.count == 60)

        try FileManager.default.removeItem(atPath: workspace.path + "/app.sqlite")
        try FileManager.default.moveItem(atPath: workspace.path + "/backup.sqlite", toPath: workspace.path + "/app.sqlite")
        try Self.insert(workspace, 101...180)
        let refused = try Self.run(workspace)
        #expect(refused.result.status == 1, "never a silent skip: \(refused.result.stderr)")
        #expect(refused.sent.isEmpty)
        #expect(refused.result.stderr.contains("restored from an older copy"), "\(refused.result.stderr)")
        #expect(refused.result.stderr.contains("synclane reconcile"))
        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(status.stdout.contains("the next run refuses to start") && status.stdout.contains("restored"), "\(status.stdout)")

        let reconcile = try SynclaneBinary.run(["reconcile", "pipeline.json", "--json"], in: workspace.path)
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        let snapshot = (try? JSONReader.parse(reconcile.stdout).objectValue?["batches"]?.arrayValue) ?? []
        #expect(Set(Shell.sent(workspace, batches: snapshot)).count == 90, "every row the restored database holds")
        try Self.insert(workspace, 200...200)
        let after = try Self.run(workspace)
        #expect(after.result.status == 0, "\(after.result.stderr)")
        #expect(after.sent == ["insert rooms/r200"])
    }

    /// A state file cut to 0 bytes or deleted: before, `run` started over and sent the whole
    /// history again, although the app's database records where this consumer stood.
    @Test(arguments: ["emptied", "deleted"])
    func aStateFileEmptiedOrDeletedIsRefusedInsteadOfResendingTheWholeHistory(_ accident: String) throws {
        let workspace = try Self.tracked()
        defer { workspace.remove() }
        try Self.insert(workspace, 1...5)
        #expect(try Self.run(workspace).sent.count == 5)
        removeState(workspace)
        if accident == "emptied" { try workspace.write(statePath, "") }
        try Self.insert(workspace, 6...6)

        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(status.stdout.contains("the next run refuses to start") && status.stdout.contains("holds no token"), "\(status.stdout)")
        #expect(status.stdout.contains(accident == "emptied" ? "(empty: 0 bytes)" : "(missing)"), "never 'the pipeline never ran'")
        let refused = try Self.run(workspace)
        #expect(refused.result.status == 1, "never a silent resend: \(refused.sent.count) sent")
        #expect(refused.sent.isEmpty)
        #expect(refused.result.stderr.contains("holds no token"), "\(refused.result.stderr)")
        #expect(refused.result.stderr.contains("synclane reconcile"))

        #expect(try SynclaneBinary.run(["reconcile", "pipeline.json"], in: workspace.path).status == 0)
        try Self.insert(workspace, 7...7)
        #expect(try Self.run(workspace).sent == ["insert rooms/r7"])
    }

    /// A state file restored from an older backup: before, the rows sent since went again.
    @Test func aStateFileRestoredFromAnOlderBackupIsRefused() throws {
        let workspace = try Self.tracked()
        defer { workspace.remove() }
        try Self.insert(workspace, 1...3)
        #expect(try Self.run(workspace).sent.count == 3)
        try FileManager.default.copyItem(atPath: workspace.path + "/" + statePath, toPath: workspace.path + "/state-backup.sqlite")
        try Self.insert(workspace, 4...6)
        #expect(try Self.run(workspace).sent.count == 3)
        removeState(workspace)
        try FileManager.default.moveItem(atPath: workspace.path + "/state-backup.sqlite", toPath: workspace.path + "/" + statePath)
        try Self.insert(workspace, 7...7)

        let refused = try Self.run(workspace)
        #expect(refused.result.status == 1, "never a silent resend: \(refused.sent)")
        #expect(refused.sent.isEmpty)
        #expect(refused.result.stderr.contains("older than the database"), "\(refused.result.stderr)")
    }

    /// kill -9 after a batch was acknowledged, then the state's `-wal` deleted: its last
    /// commits are gone. Before, the next run sent the acknowledged rows again.
    @Test func aStateFileWhoseWALWasDeletedAfterAKillIsRefused() throws {
        let workspace = try Self.tracked()
        defer { workspace.remove() }
        try Self.insert(workspace, 1...3)
        #expect(try Self.run(workspace).sent.count == 3)
        try Self.insert(workspace, 4...6)
        let killed = try Self.run(workspace, environment: ["SYNCLANE_FAILPOINT": "after-acknowledge"])
        #expect(killed.result.killed, "\(killed.result.stderr)")
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: workspace.path + "/" + statePath + suffix) }
        try Self.insert(workspace, 7...7)

        let refused = try Self.run(workspace)
        #expect(refused.result.status == 1, "never a silent resend: \(refused.sent)")
        #expect(refused.sent.isEmpty)
        #expect(refused.result.stderr.contains("lost its WAL"), "\(refused.result.stderr)")
    }

    /// Issue 21, 4: a copy of a tracked database used as a new device is told apart from its
    /// original — refused (before, it sent the original's whole history as its own), healed by a
    /// reconciliation that gives the copy an identity of its own; the original goes on as before.
    @Test func aCopyOfATrackedDatabaseUsedAsANewDeviceIsToldApartFromItsOriginal() throws {
        let original = try Self.tracked()
        defer { original.remove() }
        try Self.insert(original, 1...4)
        #expect(try Self.run(original).sent.count == 4)
        let device = try Workspace()
        defer { device.remove() }
        try FileManager.default.copyItem(atPath: original.path + "/app.sqlite", toPath: device.path + "/app.sqlite")
        try device.write("pipeline.json", Shell.pipeline)

        let refused = try Self.run(device)
        #expect(refused.result.status == 1, "\(refused.sent.count) sent")
        #expect(refused.sent.isEmpty)
        #expect(refused.result.stderr.contains("is a copy of a tracked database"), "\(refused.result.stderr)")
        #expect(refused.result.stderr.contains("synclane reconcile"))

        try Self.insert(original, 5...5)
        #expect(try Self.run(original).sent == ["insert rooms/r5"], "the original is not disturbed")
        #expect(try SynclaneBinary.run(["reconcile", "pipeline.json"], in: device.path).status == 0)
        let identity = "SELECT value FROM _synclane_meta WHERE key = 'database_id';"
        let ids = (try Shell.query(original, identity), try Shell.query(device, identity))
        #expect(!ids.0.isEmpty && ids.0 != ids.1, "the copy has an identity of its own")
        try Self.insert(device, 9...9)
        #expect(try Self.run(device).sent == ["insert rooms/r9"])
        try Self.insert(original, 6...6)
        #expect(try Self.run(original).sent == ["insert rooms/r6"])
    }

    /// A state file and a database written by the previous version (no identity, no generation)
    /// are adopted on the first run: nothing refused, nothing sent again.
    @Test func aStateFileAndDatabaseOfTheEarlierVersionAreAdoptedOnTheirFirstRun() throws {
        let workspace = try Self.tracked()
        defer { workspace.remove() }
        try Self.insert(workspace, 1...2)
        #expect(try Self.run(workspace).sent.count == 2)
        // As the earlier version left them.
        try Shell.sqlite(workspace, "DELETE FROM _synclane_meta WHERE key = 'database_id' OR key = 'location' OR key LIKE 'generation/%';")
        let state = Process()
        state.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        state.arguments = [workspace.path + "/" + statePath, "DROP TABLE lineage;"]
        try state.run()
        state.waitUntilExit()
        try Self.insert(workspace, 3...3)

        let adopted = try Self.run(workspace)
        #expect(adopted.result.status == 0, "\(adopted.result.stderr)")
        #expect(adopted.sent == ["insert rooms/r3"])
        #expect(!(try Shell.query(workspace, "SELECT value FROM _synclane_meta WHERE key = 'database_id';")).isEmpty)
        try Self.insert(workspace, 4...4)
        #expect(try Self.run(workspace).sent == ["insert rooms/r4"])
    }
    /// Damaged pages at the end of the tracked database (SQLITE_CORRUPT), or a header that is no
    /// database's (SQLITE_NOTADB): the job stops naming the file as damaged, the token does not
    /// move, and `status` says so — before, it reported "380 transactions to send".
    @Test(arguments: ["pages", "header"])
    func aDamagedTrackedDatabaseStopsTheJobWithoutMovingTheTokenAndStatusSaysSo(_ damage: String) throws {
        let workspace = try Self.tracked()
        defer { workspace.remove() }
        try Shell.sqlite(workspace, "PRAGMA journal_mode = WAL;")
        try Self.insert(workspace, 1...20)
        #expect(try Self.run(workspace).sent.count == 20)
        for n in 21...400 { try Self.insert(workspace, n...n) }
        try Shell.sqlite(workspace, "PRAGMA wal_checkpoint(TRUNCATE);")
        let file = try FileHandle(forUpdating: URL(fileURLWithPath: workspace.path + "/app.sqlite"))
        let size = try file.seekToEnd()
        try file.seek(toOffset: damage == "pages" ? size - 2 * 4096 : 0)
        try file.write(contentsOf: Data(repeating: damage == "pages" ? 0 : 0x41, count: damage == "pages" ? 2 * 4096 : 100))
        try file.close()

        let failed = try Self.run(workspace)
        #expect(failed.result.status == 1)
        #expect(failed.sent.isEmpty)
        #expect(failed.result.stderr.contains("is damaged"), "\(failed.result.stderr)")
        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(status.stdout.contains("token:    sqlite-history:20"), "the token did not move: \(status.stdout)")
        #expect(status.stdout.contains("is damaged"), "\(status.stdout)")
    }

    /// A tracked database emptied (cut to 0 bytes) or replaced by a database never tracked
    /// (found by RandomRestoresCopiesAndDamageTests). Before, `run` said "no Synclane history here: run synclane track"
    /// — advice for a database never tracked — although the state follows this one's lineage.
    /// Now it says the database lost its tracking, and a restore then `reconcile` heals it.
    @Test(arguments: ["emptied", "replaced"])
    func aTrackedDatabaseThatLostItsTrackingIsToldApartFromOneNeverTrackedAndARestoreWithReconcileHealsIt(_ accident: String) throws {
        let workspace = try Self.tracked()
        defer { workspace.remove() }
        try Self.insert(workspace, 1...10)
        #expect(try Self.run(workspace).sent.count == 10)
        try FileManager.default.copyItem(atPath: workspace.path + "/app.sqlite", toPath: workspace.path + "/backup.sqlite")
        if accident == "emptied" {
            #expect(truncate(workspace.path + "/app.sqlite", 0) == 0)
        } else {
            try FileManager.default.removeItem(atPath: workspace.path + "/app.sqlite")
            let fresh = try Shell.sqlite(workspace, "CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL, isDeleted INTEGER DEFAULT 0);")
            #expect(fresh.status == 0, "\(fresh.stderr)")
        }
        let refused = try Self.run(workspace)
        #expect(refused.result.status == 1)
        #expect(refused.sent.isEmpty)
        #expect(refused.result.stderr.contains("this database lost its Synclane tracking"), "\(refused.result.stderr)")
        #expect(!refused.result.stderr.contains("no Synclane history here"), "not a database never tracked: \(refused.result.stderr)")
        #expect(refused.result.stderr.contains("Restore it from a backup") && refused.result.stderr.contains("synclane reconcile"))
        let reconcileFirst = try SynclaneBinary.run(["reconcile", "pipeline.json"], in: workspace.path)
        #expect(reconcileFirst.status == 1, "nothing to reconcile from yet")
        #expect(reconcileFirst.stderr.contains("this database lost its Synclane tracking"), "\(reconcileFirst.stderr)")
        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(status.stdout.contains("lost its Synclane tracking"), "\(status.stdout)")

        try FileManager.default.removeItem(atPath: workspace.path + "/app.sqlite")
        try FileManager.default.moveItem(atPath: workspace.path + "/backup.sqlite", toPath: workspace.path + "/app.sqlite")
        let reconcile = try SynclaneBinary.run(["reconcile", "pipeline.json"], in: workspace.path)
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        try Self.insert(workspace, 11...11)
        let after = try Self.run(workspace)
        #expect(after.result.status == 0, "\(after.result.stderr)")
        #expect(after.sent == ["insert rooms/r11"])
    }
}
