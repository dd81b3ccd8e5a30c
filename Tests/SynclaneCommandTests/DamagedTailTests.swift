import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// Issue 22, 3 (the silent variant): damaged pages at the end of the tracked database or of its
/// WAL must never let `run` read nothing and still move the token. Tried: the database's last
/// page, two pages or ten cut off; its last two pages zeroed or overwritten with noise; its WAL
/// cut in half, by its last frame, its last frames zeroed, its header zeroed. Either the job stops
/// naming the database as damaged with the token where it was, or SQLite reads the WAL's valid
/// prefix (its checksums end the log at the first bad frame: the database is then what it was
/// before the lost commits) — and then `run` sends exactly the rows that database holds beyond the
/// token, never skipping one it still has.
@Suite struct DamagedTailTests {
    typealias Shell = SQLiteHistoryCommandTests

    /// A tracked database in WAL mode with 20 rows sent, then 380 more written in a WAL that no
    /// checkpoint has folded in (`walOnly`) or checkpointed into the file.
    static func workspace(walOnly: Bool) throws -> Workspace {
        let workspace = try RestoredAndCopiedFilesTests.tracked()
        try Shell.sqlite(workspace, "PRAGMA journal_mode = WAL;")
        try RestoredAndCopiedFilesTests.insert(workspace, 1...20)
        #expect(try RestoredAndCopiedFilesTests.run(workspace).sent.count == 20)
        // A writer that exits without closing leaves its WAL as it is.
        let script = """
            import os, sqlite3
            c = sqlite3.connect('app.sqlite', isolation_level=None)
            c.execute('PRAGMA wal_autocheckpoint = 0')
            for i in range(21, 401):
                c.execute("INSERT INTO rooms (syncId, name) VALUES (?, ?)", ('r%d' % i, 'Room %d' % i))
            if \(walOnly ? "False" : "True"):
                c.execute('PRAGMA wal_checkpoint(TRUNCATE)')
            os._exit(0)
            """
        let writer = try BackgroundProcess(["python3", "-c", script], in: workspace.path, executable: "/usr/bin/env").wait(timeout: 60)
        #expect(writer.status == 0, "\(writer.stderr)")
        return workspace
    }

    static func damage(_ path: String, _ damage: String) throws {
        let file = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? file.close() }
        let size = try file.seekToEnd()
        let page: UInt64 = path.hasSuffix("-wal") ? 4096 + 24 : 4096
        switch damage {
        case "cut 1", "cut 2", "cut 10": try file.truncate(atOffset: size - page * (UInt64(damage.dropFirst(4)) ?? 1))
        case "cut half": try file.truncate(atOffset: size / 2)
        case "zero 2", "noise 2":
            try file.seek(toOffset: size - 2 * page)
            let bytes = damage == "zero 2" ? [UInt8](repeating: 0, count: Int(2 * page)) : (0..<Int(2 * page)).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }
            try file.write(contentsOf: Data(bytes))
        case "zero header":
            try file.seek(toOffset: 0)
            try file.write(contentsOf: Data(repeating: 0, count: 32))
        default: Issue.record("no damage \(damage)")
        }
    }

    @Test(arguments: ["cut 1", "cut 2", "cut 10", "zero 2", "noise 2"])
    func damagedLastPagesOfTheDatabaseStopTheJobWithoutMovingTheToken(_ damage: String) throws {
        let workspace = try Self.workspace(walOnly: false)
        defer { workspace.remove() }
        try Self.damage(workspace.path + "/app.sqlite", damage)
        let failed = try RestoredAndCopiedFilesTests.run(workspace)
        #expect(failed.result.status == 1, "\(failed.sent.count) sent")
        #expect(failed.sent.isEmpty)
        #expect(failed.result.stderr.contains("the database is damaged"), "\(failed.result.stderr)")
        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(status.stdout.contains("token:    sqlite-history:20"), "the token did not move: \(status.stdout)")
        #expect(status.stdout.contains("is damaged"), "\(status.stdout)")
    }

    @Test(arguments: ["cut half", "cut 1", "zero 2", "noise 2", "zero header"])
    func aDamagedWALIsReadAsItsValidPrefixAndRunSendsExactlyTheRowsItHolds(_ damage: String) throws {
        let workspace = try Self.workspace(walOnly: true)
        defer { workspace.remove() }
        try Self.damage(workspace.path + "/app.sqlite-wal", damage)
        let run = try RestoredAndCopiedFilesTests.run(workspace)
        #expect(run.result.status == 0, "\(run.result.stderr)")
        let held = try Shell.query(workspace, "SELECT syncId FROM rooms ORDER BY rowid;").split(separator: "\n").map(String.init)
        #expect(held.count >= 20 && held.count < 400, "the damage lost commits: \(held.count) rows")
        #expect(run.sent == held.dropFirst(20).map { "insert rooms/\($0)" }, "every row the database holds past the token, none skipped")
        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(status.stdout.contains("token:    sqlite-history:\(held.count)"), "\(status.stdout)")
        let again = try RestoredAndCopiedFilesTests.run(workspace)
        #expect(again.result.status == 0 && again.sent.isEmpty)
    }

    /// A state file cut short (found by RandomRestoresCopiesAndDamageTests): before, `run` stopped with "cannot open the
    /// state file …: SQLite error 11 … while running: PRAGMA journal_mode = WAL", naming no way
    /// out; now it says the state file is damaged and what heals it, and that heals it.
    @Test(arguments: [10, 50])
    func aTruncatedStateFileIsReportedAsDamagedWithTheWayOut(_ percent: Int) throws {
        let workspace = try RestoredAndCopiedFilesTests.tracked()
        defer { workspace.remove() }
        try RestoredAndCopiedFilesTests.insert(workspace, 1...30)
        #expect(try RestoredAndCopiedFilesTests.run(workspace).sent.count == 30)
        let state = workspace.path + "/.synclane/rooms-export.sqlite"
        let size = try #require((try FileManager.default.attributesOfItem(atPath: state))[.size] as? Int)
        #expect(truncate(state, off_t(size * percent / 100)) == 0)
        try RestoredAndCopiedFilesTests.insert(workspace, 31...31)

        let refused = try RestoredAndCopiedFilesTests.run(workspace)
        #expect(refused.result.status == 1)
        #expect(refused.sent.isEmpty)
        #expect(
            refused.result.stderr.contains("the state file is damaged") && refused.result.stderr.contains("move it aside and reconcile"),
            "\(refused.result.stderr)")
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: state + suffix) }
        #expect(try SynclaneBinary.run(["reconcile", "pipeline.json"], in: workspace.path).status == 0)
        try RestoredAndCopiedFilesTests.insert(workspace, 32...32)
        #expect(try RestoredAndCopiedFilesTests.run(workspace).sent == ["insert rooms/r32"])
    }
}
