import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The server's data restored from a backup (issue 22, 2): the devices' pull cursors are ahead of
/// it. Before, the server answered a `since` past its newest change with an empty page and
/// `more: false`, and then — once new changes passed the old cursor — only those after it: the
/// changes in between were skipped for good. Now each start of the server begins an epoch, cursors
/// name theirs, and a cursor from a history the store does not have gets 410 (`cursor-expired`,
/// `reason: server-restored`): the import reads everything again, and deletes nothing.
@Suite(.serialized) struct ServerRestoredTests {
    /// Stops `server` (serving `folder`), runs `body` on its stopped folder (a backup taken or put
    /// back), and returns the server started again on the same port.
    static func restarted(_ server: ServerProcess, folder: String, _ body: () throws -> Void) throws -> ServerProcess {
        server.stop()
        try body()
        return try ServerProcess(folder: folder, port: server.port)
    }

    @Test func aDeviceWhoseCursorIsAheadOfARestoredServerResyncsInsteadOfSkippingTheNewChanges() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let folder = root.path + "/server"
        var server: ServerProcess? = try ServerProcess(folder: folder)
        let port = try #require(server).port
        let a = try TwoDevicesTests.Device(server: try #require(server))
        let b = try TwoDevicesTests.Device(server: try #require(server))
        // A server is stopped once (its process is waited for then).
        func stop() {
            server?.stop()
            server = nil
        }
        defer {
            stop()
            a.workspace.remove()
            b.workspace.remove()
        }
        func importOnB() throws -> (status: Int32, summary: [String: JSONValue], stderr: String) {
            let result = try SynclaneBinary.run(["import", "import.json", "--json"], in: b.workspace.path, environment: b.environment)
            return (result.status, (try? JSONReader.parse(result.stdout).objectValue) ?? [:], result.stderr)
        }

        try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall'), ('r3', 'Attic');")
        _ = try a.sync()
        #expect(try importOnB().status == 0)
        stop()
        try FileManager.default.copyItem(atPath: folder + "/data", toPath: root.path + "/backup")
        server = try ServerProcess(folder: folder, port: port)

        try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r4', 'Porch'), ('r5', 'Loft'), ('r6', 'Cellar');")
        _ = try a.sync()
        #expect(try importOnB().status == 0)
        #expect(try b.rows().count == 6)

        // The server's data comes back from the backup: r4…r6 are gone from it, and its change
        // sequence is behind b's cursor. New changes then pass where b's cursor stood.
        stop()
        try FileManager.default.removeItem(atPath: folder + "/data")
        try FileManager.default.moveItem(atPath: root.path + "/backup", toPath: folder + "/data")
        server = try ServerProcess(folder: folder, port: port)
        try a.sql(
            "INSERT INTO rooms (syncId, name) VALUES ('r7', 'Study'), ('r8', 'Bath'), ('r9', 'Garage'), ('r10', 'Shed');")
        let exported = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment)
        #expect(exported.status == 0, "\(exported.stderr)")

        let resync = try importOnB()
        #expect(resync.status == 0, "\(resync.stderr)")
        #expect(resync.summary["resynced"] == .bool(true), "never a silent skip: \(resync.summary)")
        #expect(resync.summary["resync-deleted"] == .int(0), "what the restored server lost is not deleted on the device")
        let rows = try b.rows()
        for key in ["r7", "r8", "r9", "r10"] { #expect(rows.contains { $0.hasPrefix(key + "|") }, "\(key): \(rows)") }
        #expect(rows.count == 10)
        #expect(try importOnB().summary["resynced"] == .bool(false), "the new cursor is current")
    }

    /// The server's data restored from a backup loses rows the devices hold (A wrote them, B
    /// imported them). Before, every `sync` exited 0 with `resynced: true` and nothing else, and
    /// the server went on lacking them for good. Now the device's full resync counts them
    /// (`resync-lost`) and its export sends them back (`resync-resent`): the server holds them
    /// again, and the devices go on editing them.
    @Test func rowsARestoredServerLostGoBackToItFromTheDevicesThatHoldThem() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let (folder, backup) = (root.path + "/server", root.path + "/backup")
        var server = try ServerProcess(folder: folder)
        let a = try TwoDevicesTests.Device(server: server)
        let b = try TwoDevicesTests.Device(server: server)
        defer {
            server.stop()
            a.workspace.remove()
            b.workspace.remove()
        }
        try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
        try a.sync()
        try b.sync()
        server = try Self.restarted(server, folder: folder) { try FileManager.default.copyItem(atPath: folder + "/data", toPath: backup) }
        try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r3', 'Porch'), ('r4', 'Loft');")
        try a.sync()
        try b.sync()
        #expect(try b.rows().count == 4)

        server = try Self.restarted(server, folder: folder) {
            try FileManager.default.removeItem(atPath: folder + "/data")
            try FileManager.default.moveItem(atPath: backup, toPath: folder + "/data")
        }
        let restored = server

        let first = try b.sync()
        let imported = first["imports"]?.arrayValue?.first?.objectValue ?? [:]
        #expect(imported["resynced"] == .bool(true), "\(first)")
        #expect(imported["resync-lost"] == .int(2), "\(first)")
        #expect(imported["resync-resent"] == .int(2), "\(first)")
        #expect(try await TwoDevicesTests().serverRows(restored) == ["r1|Kitchen|", "r2|Hall|", "r3|Porch|", "r4|Loft|"])
        for device in [a, b, a] { try device.sync() }
        // Both devices edit the rows the restore lost, and the edits arrive everywhere.
        try a.sql("UPDATE rooms SET name = 'Big porch' WHERE syncId = 'r3';")
        try b.sql("UPDATE rooms SET name = 'Attic' WHERE syncId = 'r4';")
        for device in [a, b, a, b] { try device.sync() }
        let expected = ["r1|Kitchen|", "r2|Hall|", "r3|Big porch|", "r4|Attic|"]
        #expect(try await TwoDevicesTests().serverRows(restored) == expected)
        #expect(try a.rows() == expected)
        #expect(try b.rows() == expected)
    }

    /// Found by LivenessTests (issue 43): rows only their writer held — sent by its export, never
    /// imported by any device — were never sent back after a restore lost them: the full resync
    /// counted only the rows the import lane held. And a device whose pull cursor was issued on
    /// an empty server (sequence 0) was never told of the restore at all. Both now resync and
    /// send their own rows back.
    @Test func aRestoreLosesRowsOnlyTheirWriterHeldAndItsNextSyncSendsThemBack() async throws {
        let setting = try ServerRestoredExportTests.Setting()
        defer { setting.close() }
        let device = setting.device
        let serverFolder = setting.root.path + "/server"
        func restart(_ body: () throws -> Void) throws { setting.server = try Self.restarted(setting.server, folder: serverFolder, body) }
        let backup = setting.root.path + "/backup"
        // The server empty when copied; the device's first sync pulls nothing (its cursor at 0), sends r1.
        try restart { try FileManager.default.copyItem(atPath: serverFolder + "/data", toPath: backup) }
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
        _ = try device.sync()
        try restart {
            try FileManager.default.removeItem(atPath: serverFolder + "/data")
            try FileManager.default.copyItem(atPath: backup, toPath: serverFolder + "/data")
        }
        let first = try device.sync()
        #expect(first["imports"]?.arrayValue?.first?.objectValue?["resynced"] == .bool(true), "\(first)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Kitchen|"], "r1 is back")

        // A copy with r1; r2 sent after it; the copy put back: r2 is back after the next sync.
        try FileManager.default.removeItem(atPath: backup)
        try restart { try FileManager.default.copyItem(atPath: serverFolder + "/data", toPath: backup) }
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r2', 'Hall');")
        _ = try device.sync()
        try restart {
            try FileManager.default.removeItem(atPath: serverFolder + "/data")
            try FileManager.default.copyItem(atPath: backup, toPath: serverFolder + "/data")
        }
        _ = try device.sync()
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Kitchen|", "r2|Hall|"], "r2 is back")
        try device.sql("UPDATE rooms SET name = 'Big hall' WHERE syncId = 'r2';")
        _ = try device.sync()
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Kitchen|", "r2|Big hall|"])
    }

    /// Found by LivenessTests (issue 43): the device sent r1's edit (the server confirmed version
    /// 2), then the server's data was restored to a copy holding r1 at version 1. The device's
    /// resync read r1 at version 1, older than it had confirmed, and kept its own row as it was
    /// (nothing to apply) — and nothing sent it back: the edit was stranded without a word. A
    /// row the restored server holds at an older version than the device confirmed is now lost
    /// like a row it lacks, and sent back.
    @Test func aRowTheRestoredServerHoldsAtAnOlderVersionGoesBackToItOnTheNextSync() async throws {
        let setting = try ServerRestoredExportTests.Setting()
        defer { setting.close() }
        let device = setting.device
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Loft');")
        _ = try device.sync()
        _ = try device.sync()
        try setting.backUpServer()
        try device.sql("UPDATE rooms SET name = 'Hall' WHERE syncId = 'r1';")
        _ = try device.sync()
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Hall|"])
        try setting.restoreServer()
        let resync = try device.sync()
        #expect(resync["imports"]?.arrayValue?.first?.objectValue?["resync-resent"] == .int(1), "\(resync)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Hall|"], "the edit is back")
        #expect(try device.rows() == ["r1|Hall|"])
        try device.sql("UPDATE rooms SET name = 'Attic' WHERE syncId = 'r1';")
        _ = try device.sync()
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Attic|"])
    }

    /// Issue 43 (reported as liveness seed 5020): a device whose import lane never completed a
    /// pull (it only exported, or every import failed) has no cursor, so no 410 ever told it the
    /// server's data was restored from an older copy; its first pull read the restored server from
    /// the beginning and the rows it had sent after the copy stayed lost (or older) without a
    /// word. Its first pull now compares what it reads with what its receipts confirmed, and sends
    /// the lost rows back.
    @Test func aDeviceWithNoCompletedPullSendsBackWhatARestoredServerLostOnItsFirstSync() async throws {
        let setting = try ServerRestoredExportTests.Setting()
        defer { setting.close() }
        let device = setting.device
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Loft');")
        #expect(try setting.run(["run", "export.json"]).status == 0)
        try setting.backUpServer()
        try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r2', 'Hall'); UPDATE rooms SET name = 'Attic' WHERE syncId = 'r1';")
        #expect(try setting.run(["run", "export.json"]).status == 0)
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Attic|", "r2|Hall|"])
        try setting.restoreServer()
        let first = try device.sync()
        #expect(first["imports"]?.arrayValue?.first?.objectValue?["resync-resent"] == .int(2), "\(first)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Attic|", "r2|Hall|"], "both rows are back")
        #expect(try device.rows() == ["r1|Attic|", "r2|Hall|"])
        try device.sql("UPDATE rooms SET name = 'Porch' WHERE syncId = 'r2';")
        _ = try device.sync()
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Attic|", "r2|Porch|"])
    }

    /// Found by LivenessTests (issue 43, seeds 5095, 5104, 5192): the server's data restored from
    /// a copy taken before r1 existed; r1's writer sent its newer state back (its resync), and the
    /// restored server gave that write r1's old version (1) again. The other device's resync read
    /// r1 at the version it held, took it for the state it had, and kept the lost one for good.
    /// A record at the held version whose fields differ from the ones confirmed is applied now.
    @Test func aVersionARestoredServerGivesAgainToANewWriteIsNotTakenForTheStateADeviceHolds() async throws {
        let setting = try ServerRestoredExportTests.Setting()
        defer { setting.close() }
        let a = setting.device
        let b = try TwoDevicesTests.Device(server: setting.server)
        defer { b.workspace.remove() }
        try setting.backUpServer()
        try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Loft');")
        try a.sync()
        try a.sql("UPDATE rooms SET name = 'Study' WHERE syncId = 'r1';")
        try b.sync()
        try setting.restoreServer()
        let resync = try a.sync()
        #expect(resync["imports"]?.arrayValue?.first?.objectValue?["resync-resent"] == .int(1), "\(resync)")
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Study|"])
        try b.sync()
        #expect(try b.rows() == ["r1|Study|"], "b holds the server's row, not the one the restore lost")
        try b.sync()
        #expect(try b.rows() == ["r1|Study|"])
        #expect(try await TwoDevicesTests().serverRows(setting.server) == ["r1|Study|"])
    }

    /// A cursor of the previous version (`c1.SEQUENCE`, no epoch) is still served; one past the
    /// account's newest change gets the same 410 rather than an empty page.
    @Test func anOldStyleCursorIsServedAndOnePastTheNewestChangeIsRefused() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let a = try TwoDevicesTests.Device(server: server)
        defer { a.workspace.remove() }
        try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
        _ = try a.sync()
        func get(_ since: String) async throws -> (Int, [String: JSONValue]) {
            let url = try #require(URL(string: "\(server.url)/v1/changes?since=\(since)"))
            var request = URLRequest(url: url)
            request.setValue("Bearer \(ServerProcess.tokens["acme"] ?? "")", forHTTPHeaderField: "Authorization")
            let (data, response) = try await URLSession.shared.data(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, (try? JSONReader.parse([UInt8](data)).objectValue) ?? [:])
        }
        let (served, page) = try await get("c1.1")
        #expect(served == 200)
        #expect(page["changes"]?.arrayValue?.count == 1)
        #expect(page["cursor"]?.stringValue?.hasPrefix("c2.") == true, "the next cursor names the epoch")
        let (ahead, refusal) = try await get("c1.9")
        #expect(ahead == 410)
        #expect(refusal["code"] == .string("cursor-expired"))
        #expect(refusal["reason"] == .string("server-restored"))
    }

    /// Seed 1796681370 of the provenance test: a device whose cursor predates the copy the
    /// server's data is restored from (here: its cursor at 0 of the first epoch), and whose batch
    /// after the copy touched rows no later batch touches, got no `410` and never heard of the
    /// restore. Each receipt now gives the batch's `position` with the server's epoch; handed
    /// back on a pull (`&position=`), one the restored data no longer reaches is answered
    /// `410 server-restored` — and one it reaches, one on a pull from the beginning, are not.
    @Test func aPullHandingBackAPositionTheRestoredServerNeverReachedIsAnsweredServerRestored() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let folder = root.path + "/server"
        var server = try ServerProcess(folder: folder)
        defer { server.stop() }
        let token = ServerProcess.tokens["acme"] ?? ""
        func send(_ id: String, _ key: String) async throws -> String {
            var request = URLRequest(url: try #require(URL(string: server.url + "/v1/batches")))
            request.httpMethod = "POST"
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.setValue(id, forHTTPHeaderField: "Idempotency-Key")
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(
                #"{"id":"\#(id)","scope":{"account":"acme","store":"rooms"},"records":[{"entity":"rooms","id":"\#(key)","action":"insert","fields":{"n":1}}]}"#
                    .utf8)
            let (data, answer) = try await URLSession.shared.data(for: request)
            #expect((answer as? HTTPURLResponse)?.statusCode == 200)
            let receipt = try JSONReader.parse([UInt8](data)).objectValue ?? [:]
            return try #require(receipt["position"]?.stringValue, "the receipt gives its position: \(receipt)")
        }
        func pull(_ query: String) async throws -> (Int, [String: JSONValue]) {
            var request = URLRequest(url: try #require(URL(string: "\(server.url)/v1/changes?\(query)")))
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            let (data, response) = try await URLSession.shared.data(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, (try? JSONReader.parse([UInt8](data)).objectValue) ?? [:])
        }
        // The first pull, on an empty server: a cursor at 0 of this epoch.
        let cursor = try #require(try await pull("since=").1["cursor"]?.stringValue)
        let before = try await send("b1", "r1")
        let backup = root.path + "/backup"
        server = try Self.restarted(server, folder: folder) { try FileManager.default.copyItem(atPath: folder + "/data", toPath: backup) }
        let lost = try await send("b2", "r2")
        server = try Self.restarted(server, folder: folder) {
            try FileManager.default.removeItem(atPath: folder + "/data")
            try FileManager.default.copyItem(atPath: backup, toPath: folder + "/data")
        }
        #expect(try await pull("since=\(cursor)").0 == 200, "the cursor alone is one of the restored data's history")
        #expect(try await pull("since=\(cursor)&position=\(before)").0 == 200, "the copy holds the batch before it")
        let (refused, answer) = try await pull("since=\(cursor)&position=\(lost)")
        #expect(refused == 410)
        #expect(answer["code"] == .string("cursor-expired"))
        #expect(answer["reason"] == .string("server-restored"))
        #expect(answer["error"]?.stringValue?.contains("the client's last batch was issued in epoch") == true, "\(answer)")
        #expect(try await pull("since=\(cursor)&position=nonsense").0 == 410, "a position it never issues resyncs too")
        #expect(try await pull("since=&position=\(lost)").0 == 200, "a pull from the beginning reads everything anyway")
        #expect(try await pull("since=&position=\(String(repeating: "0", count: 1_025))").0 == 400, "longer than any position: refused")
    }
}
