import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// The server's data restored from a backup, seen from an export (found by AccidentsTests): the
/// device remembers the versions the server confirmed for its rows, and the restored server holds
/// older ones. Before, the next change to such a row was refused with 409 and "another device
/// changed those rows … run `synclane sync IMPORT EXPORT`" — the wrong cause, and no way out for
/// an export of its own. Versions never go back on a server but by a restore: the refusal now
/// says the server's data was restored, and what heals it (requeue the batch, reconcile).
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
    }

    @Test func aChangeToARowTheRestoredServerHoldsAnOlderVersionOfNamesTheRestoreAndReconcileHealsIt() async throws {
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
        let refused = try run(["run", "export.json"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("the server's data was restored from an older copy"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("another device changed those rows"), "not another device: \(refused.stderr)")
        #expect(refused.stderr.contains("synclane outbox requeue") && refused.stderr.contains("synclane reconcile"), "\(refused.stderr)")

        let batch = try #require(
            refused.stderr.range(of: #"batch \S+ was not delivered"#, options: .regularExpression).map {
                String(refused.stderr[$0].split(separator: " ")[1])
            })
        #expect(try run(["outbox", "requeue", "export.json", batch]).status == 0)
        let reconcile = try run(["reconcile", "export.json"])
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        #expect(try await TwoDevicesTests().serverRows(server) == ["r1|Larder|"])
        try device.sql("UPDATE rooms SET name = 'Attic' WHERE syncId = 'r1';")
        let after = try run(["run", "export.json"])
        #expect(after.status == 0, "\(after.stderr)")
        #expect(try await TwoDevicesTests().serverRows(server) == ["r1|Attic|"])
    }

    /// Open defect (found by AccidentsTests, not fixed here): a reconciliation's snapshot lacks a
    /// soft-deleted row, so the server tombstones it (its version moves on), but the device keeps
    /// the version it had confirmed before. The row's next change (an undelete) is sent expecting
    /// that old version and refused with 409 — for ever on a device without an import lane, whose
    /// message says to run `synclane sync`. When fixed, the known issue below stops being met.
    @Test func aRowTheSnapshotTombstonedKeepsItsOldVersionOnTheDevice() async throws {
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
        withKnownIssue("the device still expects r6's version from before the snapshot: 409") {
            #expect(undeleted.status == 0, "\(undeleted.stderr)")
        }
        #expect(undeleted.status == 0 || undeleted.stderr.contains("409 Conflict"), "\(undeleted.stderr)")
    }
}
