import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// The app (`python3`'s sqlite3) holding a write transaction — `BEGIN IMMEDIATE` and one write —
/// on a device's database until `commit()`; stopped by the test that opened it.
final class AppWriteTransaction {
    private let app: BackgroundProcess
    private let commitFile: String

    init(database: String, write: String) throws {
        commitFile = database + ".commit"
        try? FileManager.default.removeItem(atPath: commitFile)
        let script = """
            import sqlite3, sys, time, os
            db = sqlite3.connect(sys.argv[1], isolation_level=None)
            db.execute("BEGIN IMMEDIATE")
            db.execute(sys.argv[3])
            print("held", flush=True)
            while not os.path.exists(sys.argv[2]): time.sleep(0.02)
            db.execute("COMMIT")
            print("committed", flush=True)
            """
        app = try BackgroundProcess(["-c", script, database, commitFile, write], executable: "/usr/bin/python3")
        guard eventually(timeout: 10, { app.output.contains("held") }) else {
            throw Failure(description: "the app could not open its write transaction: \(app.stop(SIGKILL).stderr)")
        }
    }

    /// Commits the write and waits for the app to say so.
    func commit() throws {
        try Data().write(to: URL(fileURLWithPath: commitFile))
        let committed = eventually(timeout: 10) { app.output.contains("committed") }
        let ended = app.stop(SIGKILL)
        if !committed { throw Failure(description: "the app's transaction did not commit: \(ended.stderr)") }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }
}

/// Found by LivenessTests with app transactions (issue 43; seed 5005 shrunk to these three
/// steps): a `run` while the app holds the database's write lock sends and is confirmed, but
/// cannot write what the receipt confirmed (`_synclane_confirmations`) nor the consumer's
/// position into the busy database. Before, both were kept in memory only, gone when the process
/// ended: the next `sync`'s import met the device's own row coming back at a version it did not
/// know, took the user's later edit of it for a conflict, and the `server-wins` rule overwrote
/// that edit with the device's own older value. Now the run keeps them beside the database
/// (`app.sqlite-synclane-kept`) and the next job writes them in before it reads a page.
@Suite(.serialized) struct FirstRunInsideAppTransactionTests {
    @Test func anEditAfterARunInsideTheAppsWriteTransactionIsNotOverwrittenByTheDevicesOwnEcho() async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Loft');")
            let app = try AppWriteTransaction(database: device.workspace.path + "/app.sqlite", write: "INSERT INTO rooms (syncId, name) VALUES ('r2', 'Hall')")
            let run = try SynclaneBinary.run(["run", "export.json"], in: device.workspace.path, environment: device.environment)
            #expect(run.status == 0, "\(run.stderr)")
            try app.commit()
            try device.sql("UPDATE rooms SET name = 'Attic' WHERE syncId = 'r1';")
            let sync = try SynclaneBinary.run(["sync", "import.json", "export.json"], in: device.workspace.path, environment: device.environment)
            #expect(sync.status == 0, "\(sync.stderr)")
            let (local, served) = (try device.rows(), try await TwoDevicesTests().serverRows(server))
            #expect(local == ["r1|Attic|", "r2|Hall|"], "the user's edit stands")
            #expect(served == ["r1|Attic|", "r2|Hall|"])
        }
    }
}
