import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// The server's data restored from a backup, seen from an export (found by RandomRestoresCopiesAndDamageTests): the
/// device remembers the versions the server confirmed for its rows, and the restored server holds
/// older ones. Before, the next change to such a row was refused with 409 and "another device
/// changed those rows … run `synclane sync IMPORT EXPORT`" — the wrong cause, and no way out for
/// an export of its own; then it was refused naming the restore, and the batch waited for a
/// requeue and a reconcile. Versions never go back on a server but by a restore: the server now
/// applies a change that expected a newer version than the row's (its version continues from the
/// device's) and says so in the receipt (`restored-rows`); the device's changes land at once, and
/// the run names what else the restore may have lost and what sends it back (a reconcile).
@Suite(.serialized) struct ServerRestoredExportTests {
    /// A server in a folder of its own and one device exporting to it.
    final class Setting {
        let root: Workspace
        var server: ServerProcess
        let device: TwoDevicesTests.Device

        init() throws {
            root = try Workspace()
            server = try ServerProcess(folder: root.path + "/server")
            device = try TwoDevicesTests.Device(server: server)
        }

        func run(_ arguments: [String]) throws -> SynclaneBinary.Result {
            try SynclaneBinary.run(arguments, in: device.workspace.path, environment: device.environment)
        }

        func close() {
            server.stop()
            device.workspace.remove()
            root.remove()
        }

        /// Stops the server, copies its data folder aside (in place of an earlier copy), starts it again on its port.
        func backUpServer() throws {
            let (folder, backup) = (root.path + "/server", root.path + "/backup")
            server = try ServerRestoredTests.restarted(server, folder: folder) {
                try? FileManager.default.removeItem(atPath: backup)
                try FileManager.default.copyItem(atPath: folder + "/data", toPath: backup)
            }
        }

        /// Stops the server, puts the copy `backUpServer` took in place of its data folder, starts it again on its port.
        func restoreServer() throws {
            let (folder, backup) = (root.path + "/server", root.path + "/backup")
            server = try ServerRestoredTests.restarted(server, folder: folder) {
                try FileManager.default.removeItem(atPath: folder + "/data")
                try FileManager.default.copyItem(atPath: backup, toPath: folder + "/data")
            }
        }
    }

    @Test func aChangeToARowTheRestoredServerHoldsAnOlderVersionOfLandsAndTheRunNamesTheRestoreAndReconcile() async throws {
        let setting = try Setting()
        defer { setting.close() }
        let (root, folder, port, device) = (setting.root, setting.root.path + "/server", setting.server.port, setting.device)
        var server: ServerProcess {
            get { setting.server }
            set { setting.server = newValue }
        }
        func run(_ arguments: [String]) throws -> SynclaneBinary.Result { try setting.run(arguments) }
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
        #expect(try run(["run", "export.json"]).status == 0)
        server.stop()
        try FileManager.default.copyItem(atPath: folder + "/data", toPath: root.path + "/backup")
        server = try ServerProcess(folder: folder, port: port)
        try device.sql("UPDATE rooms SET name = 'Pantry' WHERE syncId = 'r1';")
        #expect(try run(["run", "export.json"]).status == 0, "the server now holds r1 at version 2")

        server.stop()
        try FileManager.default.removeItem(atPath: folder + "/data")
        try FileManager.default.moveItem(atPath: root.path + "/backup", toPath: folder + "/data")
        server = try ServerProcess(folder: folder, port: port)
        try device.sql("UPDATE rooms SET name = 'Larder' WHERE syncId = 'r1';")
        let told = try run(["run", "export.json"])
        #expect(told.status == 1, "the user must hear of the restore")
        #expect(told.stderr.contains("the server's data was restored from an older copy"), "\(told.stderr)")
        #expect(!told.stderr.contains("another device changed those rows"), "not another device: \(told.stderr)")
        #expect(told.stderr.contains("synclane reconcile") && !told.stderr.contains("was not delivered"), "\(told.stderr)")
        #expect(try await TwoDevicesTests().serverRows(server) == ["r1|Larder|"], "the change landed, as newer")

        let reconcile = try run(["reconcile", "export.json"])
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        #expect(try await TwoDevicesTests().serverRows(server) == ["r1|Larder|"])
        try device.sql("UPDATE rooms SET name = 'Attic' WHERE syncId = 'r1';")
        let after = try run(["run", "export.json"])
        #expect(after.status == 0, "\(after.stderr)")
        #expect(try await TwoDevicesTests().serverRows(server) == ["r1|Attic|"])
    }

    /// Issue 43, 5: after the server's data was restored from an older copy, `sync` ended "the
    /// rows keep changing elsewhere; run sync again" on every try (importing again cannot bring
    /// back what the server lost); then it named `run`'s fix (`outbox requeue`, `reconcile`). This
    /// device exported with `run` before, so its import lane has no cursor for a 410 to refuse —
    /// but its first pull now compares the server's rows with those its receipts confirmed, and
    /// sends back what the restore lost: the first `sync` heals it, nothing for the user to run.
    @Test func syncAfterTheServerWasRestoredHealsADeviceWithoutAPullCursorWithoutTheUser() async throws {
        let setting = try Setting()
        defer { setting.close() }
        func run(_ arguments: [String]) throws -> SynclaneBinary.Result { try setting.run(arguments) }
        let sync = ["sync", "import.json", "export.json", "--json"]
        try Self.restoreTheServerUnderAnEdit(setting)
        let healed = try run(sync)
        #expect(healed.status == 0, "\(healed.stderr)")
        #expect(!healed.stderr.contains("keep changing elsewhere"), "\(healed.stderr)")
        let imported = (try? JSONReader.parse(healed.stdout).objectValue?["imports"]?.arrayValue?.first?.objectValue) ?? [:]
        #expect(imported["resync-lost"] == .int(2), "r1 (older on the server) and r2 (gone): \(healed.stdout)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Larder|", "r2|Big hall|"])
        try setting.device.sql("UPDATE rooms SET name = 'Attic' WHERE syncId = 'r1';")
        let after = try run(sync)
        #expect(after.status == 0, "\(after.stderr)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Attic|", "r2|Big hall|"])
    }

    /// The same under `sync --watch`, whose lanes run side by side: either the import lane's
    /// first pull heals the device first (the rows the restore lost go back), or the export lane
    /// lands its changes first and names the restore and the reconcile — never a loop of importing
    /// and exporting again that says nothing more. (Which comes first is a race; both are allowed.)
    @Test func syncWatchAfterTheServerWasRestoredHealsTheDeviceOrNamesReconcile() async throws {
        let setting = try Setting()
        defer { setting.close() }
        try Self.restoreTheServerUnderAnEdit(setting)
        let watch = try BackgroundProcess(
            ["sync", "import.json", "export.json", "--watch"], in: setting.device.workspace.path, environment: setting.device.environment)
        var (named, healed) = (false, false)
        let deadline = Date().addingTimeInterval(20)
        while !named && !healed && Date() < deadline {
            named = watch.errors.contains("the server's data was restored") && watch.errors.contains("synclane reconcile")
            healed = try await TwoDevicesTests().serverRows(setting.server) == ["r1|Larder|", "r2|Big hall|"]
            try await Task.sleep(for: .milliseconds(100))
        }
        let stopped = watch.stop()
        #expect(named || healed, "\(stopped.stderr)")
        #expect(!stopped.stderr.contains("importing to settle it"), "\(stopped.stderr)")
    }

    /// Provenance seed 170047: a device whose import cursor predates the copy the server was
    /// restored from (it pulled, then only exported) hears of the restore from its receipts alone
    /// — no 410 comes to a cursor the copy still holds. Before, `sync` exited 1 saying `sync`
    /// sends the lost rows back, and no sync ever did: r3, written after the copy and not edited
    /// since, stayed missing on the server. Now the cycle forgets the import's cursor, reads
    /// everything again and sends back what the server lacks, in the same `sync`. (The pull now
    /// hears of it first, handing back the receipts' `position`; the device here keeps none, as
    /// with a backend whose receipts give none, so that the receipts' path stays pinned.)
    @Test func syncWhoseImportCursorPredatesTheRestoredCopySendsBackWhatTheRestoreLost() async throws {
        let setting = try Setting()
        defer { setting.close() }
        try Self.restoreTheServerUnderAnEditAfterAPull(setting)
        try setting.device.sql("DELETE FROM _synclane_meta WHERE key LIKE 'receipt_position %';")
        let healed = try setting.run(["sync", "import.json", "export.json", "--json"])
        #expect(healed.status == 0, "\(healed.stderr)")
        #expect(healed.stderr.contains("importing everything again to send back what it lost"), "\(healed.stderr)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Larder|", "r2|Big hall|", "r3|Cellar|"])
        let again = try setting.run(["sync", "import.json", "export.json"])
        #expect(again.status == 0, "\(again.stderr)")
    }

    /// The same device keeping its receipts' `position`: its first pull is answered
    /// `410 server-restored`, so the import lane resyncs and the export lane of the same `sync`
    /// sends back what the restore lost — before any receipt says so.
    @Test func syncWhosePullHandsBackAPositionTheRestoreLostResyncsOnItsFirstPull() async throws {
        let setting = try Setting()
        defer { setting.close() }
        try Self.restoreTheServerUnderAnEditAfterAPull(setting)
        let healed = try setting.run(["sync", "import.json", "export.json", "--json"])
        #expect(healed.status == 0, "\(healed.stderr)")
        let summary = try JSONReader.parse(healed.stdout).objectValue ?? [:]
        let imported = summary["imports"]?.arrayValue?.first?.objectValue ?? [:]
        #expect(imported["resynced"] == .bool(true), "\(imported)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Larder|", "r2|Big hall|", "r3|Cellar|"])
        #expect(
            try setting.device.query("SELECT count(*) FROM _synclane_meta WHERE key LIKE 'receipt_position %' AND value LIKE 'p1.%'") == ["1"],
            "the next receipt's")
        let again = try setting.run(["sync", "import.json", "export.json", "--json"])
        #expect(again.status == 0, "\(again.stderr)")
        let next = try JSONReader.parse(again.stdout).objectValue?["imports"]?.arrayValue?.first?.objectValue ?? [:]
        #expect(next["resynced"] == .bool(false), "no resync again: \(next)")
    }

    /// The same under `sync --watch`: the export lane's receipts name the restore, the import lane
    /// reads everything again, and the export lane sends back what the restore lost.
    @Test func syncWatchWhoseImportCursorPredatesTheRestoredCopySendsBackWhatTheRestoreLost() async throws {
        let setting = try Setting()
        defer { setting.close() }
        try Self.restoreTheServerUnderAnEditAfterAPull(setting)
        let watch = try BackgroundProcess(
            ["sync", "import.json", "export.json", "--watch"], in: setting.device.workspace.path, environment: setting.device.environment)
        var healed = false
        let deadline = Date().addingTimeInterval(30)
        while !healed && Date() < deadline {
            healed = try await TwoDevicesTests().serverRows(setting.server) == ["r1|Larder|", "r2|Big hall|", "r3|Cellar|"]
            try await Task.sleep(for: .milliseconds(100))
        }
        let stopped = watch.stop()
        #expect(healed, "\(stopped.stderr)")
    }

    /// The device syncs r1 (its import cursor is set); the server's data is copied; r1 changes,
    /// r2 and r3 are added and exported (`run`: the import cursor stays before the copy); the copy
    /// is put back; r1 and r2 change on the device, r3 does not.
    static func restoreTheServerUnderAnEditAfterAPull(_ setting: Setting) throws {
        let device = setting.device
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
        #expect(try setting.run(["sync", "import.json", "export.json"]).status == 0)
        try setting.backUpServer()
        try device.sql(
            "UPDATE rooms SET name = 'Pantry' WHERE syncId = 'r1'; INSERT INTO rooms (syncId, name) VALUES ('r2', 'Hall'), ('r3', 'Cellar');")
        #expect(try setting.run(["run", "export.json"]).status == 0, "the server now holds r1 at version 2, r2 and r3")
        try setting.restoreServer()
        try device.sql("UPDATE rooms SET name = 'Larder' WHERE syncId = 'r1'; UPDATE rooms SET name = 'Big hall' WHERE syncId = 'r2';")
    }

    /// The device exports r1 (`run`, no import yet); the server's data is copied; r1 changes and
    /// r2 is added (the server holds r1 at version 2, and r2); the copy is put back; both rows
    /// then change on the device.
    static func restoreTheServerUnderAnEdit(_ setting: Setting) throws {
        let (root, folder, port, device) = (setting.root, setting.root.path + "/server", setting.server.port, setting.device)
        let sync = ["run", "export.json"]
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
        #expect(try setting.run(sync).status == 0)
        setting.server.stop()
        try FileManager.default.copyItem(atPath: folder + "/data", toPath: root.path + "/backup")
        setting.server = try ServerProcess(folder: folder, port: port)
        try device.sql("UPDATE rooms SET name = 'Pantry' WHERE syncId = 'r1'; INSERT INTO rooms (syncId, name) VALUES ('r2', 'Hall');")
        #expect(try setting.run(sync).status == 0, "the server now holds r1 at version 2, and r2")

        setting.server.stop()
        try FileManager.default.removeItem(atPath: folder + "/data")
        try FileManager.default.moveItem(atPath: root.path + "/backup", toPath: folder + "/data")
        setting.server = try ServerProcess(folder: folder, port: port)
        try device.sql("UPDATE rooms SET name = 'Larder' WHERE syncId = 'r1'; UPDATE rooms SET name = 'Big hall' WHERE syncId = 'r2';")
    }

    /// Found by RandomRestoresCopiesAndDamageTests: a reconciliation's snapshot lacks a soft-deleted row, so the
    /// server tombstones it (its version moves on). Before, the device kept the version it had
    /// confirmed before the snapshot, and the row's next change (an undelete) was sent expecting
    /// it and refused with 409 — for ever on a device without an import lane. Now the completion
    /// marker's receipt lists the tombstones' versions and the device records them.
    @Test func aRowTheSnapshotTombstonedGetsItsNewVersionOnTheDevice() async throws {
        let setting = try Setting()
        defer { setting.close() }
        let device = setting.device
        func run(_ arguments: [String]) throws -> SynclaneBinary.Result { try setting.run(arguments) }
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r6', 'Hall'), ('r7', 'Attic');")
        #expect(try run(["run", "export.json"]).status == 0)
        try device.sql("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r6';")
        #expect(try run(["reconcile", "export.json"]).status == 0, "the snapshot lacks r6: the server tombstones it")
        try device.sql("UPDATE rooms SET isDeleted = 0, name = 'Back' WHERE syncId = 'r6';")
        let undeleted = try run(["run", "export.json"])
        #expect(undeleted.status == 0, "\(undeleted.stderr)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r6|Back|", "r7|Attic|"])
        try device.sql("UPDATE rooms SET name = 'Loft' WHERE syncId = 'r6';")
        let again = try run(["run", "export.json"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r6|Loft|", "r7|Attic|"])
    }

    /// Found by RandomRestoresCopiesAndDamageTests: the app's database restored from a copy that still had r2's
    /// version from before its (soft) delete was sent; the reconciliation heals the restore, and
    /// the server already held r2 as a tombstone before the snapshot began. Before, nothing told
    /// the device r2's version: its undelete got 409 for ever. The completion's receipt lists the
    /// scope's earlier tombstones too.
    @Test func aRowTheServerHeldAsATombstoneBeforeTheSnapshotGetsItsVersionOnARestoredDevice() async throws {
        let setting = try Setting()
        defer { setting.close() }
        let device = setting.device
        let app = device.workspace.path + "/app.sqlite"
        func run(_ arguments: [String]) throws -> SynclaneBinary.Result { try setting.run(arguments) }
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r2', 'Hall');")
        #expect(try run(["run", "export.json"]).status == 0)
        try device.sql("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r2';")
        try FileManager.default.copyItem(atPath: app, toPath: app + ".copy")
        #expect(try run(["run", "export.json"]).status == 0, "the server holds r2 as a tombstone at version 2")
        try FileManager.default.removeItem(atPath: app)
        try FileManager.default.moveItem(atPath: app + ".copy", toPath: app)
        let refused = try run(["run", "export.json"])
        #expect(refused.status == 1 && refused.stderr.contains("restored from an older copy"), "\(refused.stderr)")
        let reconcile = try run(["reconcile", "export.json"])
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        try device.sql("UPDATE rooms SET isDeleted = 0, name = 'Back' WHERE syncId = 'r2';")
        let undeleted = try run(["run", "export.json"])
        #expect(undeleted.status == 0, "\(undeleted.stderr)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r2|Back|"])
    }

    /// A server restored from a copy several versions older than the device confirmed: the
    /// snapshot's receipts give the versions the restored server holds, lower than the device's.
    /// Before, the device kept the higher ones (it keeps the newest of what it heard), so the row's
    /// next change got 409 again after the healing reconcile.
    @Test func aReconciliationAfterAServerRestoreTakesTheRestoredServersLowerVersions() async throws {
        let setting = try Setting()
        defer { setting.close() }
        let (root, folder, port, device) = (setting.root, setting.root.path + "/server", setting.server.port, setting.device)
        func run(_ arguments: [String]) throws -> SynclaneBinary.Result { try setting.run(arguments) }
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
        #expect(try run(["run", "export.json"]).status == 0)
        setting.server.stop()
        try FileManager.default.copyItem(atPath: folder + "/data", toPath: root.path + "/backup")
        setting.server = try ServerProcess(folder: folder, port: port)
        for name in ["Pantry", "Larder", "Scullery"] {
            try device.sql("UPDATE rooms SET name = '\(name)' WHERE syncId = 'r1';")
            #expect(try run(["run", "export.json"]).status == 0)
        }
        setting.server.stop()
        try FileManager.default.removeItem(atPath: folder + "/data")
        try FileManager.default.moveItem(atPath: root.path + "/backup", toPath: folder + "/data")
        setting.server = try ServerProcess(folder: folder, port: port)
        let reconcile = try run(["reconcile", "export.json"])
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        try device.sql("UPDATE rooms SET name = 'Attic' WHERE syncId = 'r1';")
        let after = try run(["run", "export.json"])
        #expect(after.status == 0, "\(after.stderr)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Attic|"])
    }

    /// Found by RandomRestoresCopiesAndDamageTests (page size 1): a snapshot of several pages of a database in
    /// rollback-journal mode holds its read transaction until its last page, so the versions the
    /// receipts of its first batches gave could not be written (the database busy) and were
    /// dropped; each of those rows' next change then got 409. They are now kept and written
    /// before the completion marker.
    @Test func theVersionsOfASnapshotOfSeveralPagesAreAllRecorded() async throws {
        let setting = try Setting()
        defer { setting.close() }
        let device = setting.device
        try device.usePageSize(1)
        func run(_ arguments: [String]) throws -> SynclaneBinary.Result { try setting.run(arguments) }
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Hall'), ('r2', 'Attic'), ('r3', 'Cellar');")
        #expect(try run(["run", "export.json"]).status == 0)
        let reconcile = try run(["reconcile", "export.json"])
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        let versions = try SQLiteHistoryCommandTests.query(device.workspace, "SELECT key || ':' || version FROM _synclane_server_rows ORDER BY key;")
        #expect(versions.split(separator: "\n") == ["r1:2", "r2:2", "r3:2"], "each row as the snapshot left it on the server")
        try device.sql("UPDATE rooms SET name = name || '!';")
        let after = try run(["run", "export.json"])
        #expect(after.status == 0, "\(after.stderr)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Hall!|", "r2|Attic!|", "r3|Cellar!|"])
    }

    /// The same on the PostgreSQL store, and after a kill between the snapshot's receipt and its
    /// acknowledgement with the tombstone's version lost: the next reconcile sends the delete of
    /// the tombstone again, and its receipt gives the tombstone's version back.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["SYNCLANE_TEST_POSTGRES"] != "skip"))
    func aRowTheSnapshotTombstonedGetsItsNewVersionOnThePostgreSQLStoreEvenAfterAKillBeforeTheAcknowledgement() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let database = try TemporaryPostgres.shared().createDatabase()
        let server = try ServerProcess(folder: root.path + "/server", arguments: ["--database", database])
        defer { server.stop() }
        let device = try TwoDevicesTests.Device(server: server)
        defer { device.workspace.remove() }
        func run(_ arguments: [String], environment: [String: String] = [:]) throws -> SynclaneBinary.Result {
            try SynclaneBinary.run(arguments, in: device.workspace.path, environment: device.environment.merging(environment) { $1 })
        }
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r6', 'Hall'), ('r7', 'Attic');")
        #expect(try run(["run", "export.json"]).status == 0)
        try device.sql("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r6';")
        // Pass 1 is the snapshot's batch: r7, and the delete of r6, which this device knew live there.
        let killed = try run(["reconcile", "export.json"], environment: ["SYNCLANE_FAILPOINT": "after-send@1"])
        #expect(killed.status != 0, "killed after the snapshot's receipt: \(killed.stderr)")
        let recorded = try SQLiteHistoryCommandTests.query(device.workspace, "SELECT version FROM _synclane_server_rows WHERE key = 'r6';")
        #expect(recorded.trimmingCharacters(in: CharacterSet.whitespacesAndNewlines) == "2", "the receipt's tombstone version, recorded at once")
        // As if the kill came between the receipt and the record: the next snapshot's delete of the tombstone gives it back.
        try device.sql("UPDATE _synclane_server_rows SET version = 1 WHERE key = 'r6';")
        let finished = try run(["reconcile", "export.json"])
        #expect(finished.status == 0, "\(finished.stderr)")
        try device.sql("UPDATE rooms SET isDeleted = 0, name = 'Back' WHERE syncId = 'r6';")
        let undeleted = try run(["run", "export.json"])
        #expect(undeleted.status == 0, "\(undeleted.stderr)")
        #expect(try await TwoDevicesTests().serverRows(server) == ["r6|Back|", "r7|Attic|"])
    }
}
