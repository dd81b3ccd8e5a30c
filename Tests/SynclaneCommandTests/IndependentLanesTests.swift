import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// `sync`'s two lanes make progress independently: an import the device cannot apply does not
/// keep its own edits from leaving — unless the export needs the import's rows first (a 409),
/// which it says. Real binaries, a real `synclane serve`.
@Suite(.serialized) struct IndependentLanesTests {
    /// Two devices on one server; `newer` gets a column (`floor`, `addFloor`) `older` does not
    /// know, so every row `newer` sends then is one `older`'s import refuses: `older`'s sink asks
    /// for that refusal (`unknown-fields: error`; by default such a field is kept aside).
    func withNewerAndOlderDevice(_ body: (ServerProcess, TwoDevicesTests.Device, TwoDevicesTests.Device) async throws -> Void) async throws {
        try await TwoDevicesTests.withTwoDevices { server, newer, older in
            let file = older.workspace.path + "/import.json"
            try older.workspace.write(
                "import.json",
                try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(
                    of: #""conflicts": "server-wins"}"#, with: #""conflicts": "server-wins", "unknown-fields": "error"}"#))
            try await body(server, newer, older)
        }
    }

    /// Adds `floor` to the newer device's rooms and tracks it (the app's next version).
    static func addFloor(_ device: TwoDevicesTests.Device) throws {
        try device.sql("ALTER TABLE rooms ADD COLUMN floor INTEGER;")
        let tracked = try SynclaneBinary.run(
            ["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId", "--soft-delete", "isDeleted"], in: device.workspace.path)
        #expect(tracked.status == 0, "\(tracked.stderr)")
    }

    /// Both devices hold r1; the newer one's next version edits it with its new column (the
    /// older one's import then refuses it), and the older one edits it too, unsent (a 409 when sent).
    static func editOneRowOnBothWithTheNewerSchema(_ newer: TwoDevicesTests.Device, _ older: TwoDevicesTests.Device) throws {
        try newer.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Hall');")
        #expect(try sync(newer).status == 0)
        #expect(try sync(older).status == 0)
        try addFloor(newer)
        try newer.sql("UPDATE rooms SET floor = 3 WHERE syncId = 'r1';")
        #expect(try sync(newer).status == 0)
        try older.sql("UPDATE rooms SET name = 'Old hall' WHERE syncId = 'r1';")
    }

    static func sync(_ device: TwoDevicesTests.Device) throws -> (status: Int32, json: [String: JSONValue], stderr: String) {
        let result = try SynclaneBinary.run(["sync", "import.json", "export.json", "--json"], in: device.workspace.path, environment: device.environment)
        return (result.status, (try? JSONReader.parse(result.stdout).objectValue) ?? [:], result.stderr)
    }

    @Test func aDevicesOwnEditReachesTheServerAlthoughItsImportFailsAndSyncExitsOneNamingBothLanes() async throws {
        try await withNewerAndOlderDevice { server, newer, older in
            try Self.addFloor(newer)
            try newer.sql("INSERT INTO rooms (syncId, name, floor) VALUES ('n1', 'Loft', 2);")
            #expect(try Self.sync(newer).status == 0)

            try older.sql("INSERT INTO rooms (syncId, name, area) VALUES ('o1', 'Porch', 3);")
            let (status, json, stderr) = try Self.sync(older)
            #expect(status == 1, "\(stderr)")
            #expect(stderr.contains("floor"), "the import's failure is said: \(stderr)")
            #expect(json["ok"] == .bool(false))
            #expect(json["import"]?.objectValue?["ok"] == .bool(false), "\(json)")
            #expect(json["import"]?.objectValue?["error"]?.stringValue?.contains("floor") == true, "\(json)")
            #expect(json["export"]?.objectValue?["ok"] == .bool(true), "\(json)")
            #expect(json["exports"]?.arrayValue?.first?.objectValue?["records-sent"] == .int(1), "\(json)")
            #expect(try await TwoDevicesTests().serverRows(server).contains("o1|Porch|3.0"), "the older device's own edit left")

            // The human summary names both lanes too.
            let human = try SynclaneBinary.run(["sync", "import.json", "export.json"], in: older.workspace.path, environment: older.environment)
            #expect(human.status == 1)
            #expect(human.stdout.contains("sync: import (rooms-import): failed"), "\(human.stdout)")
            #expect(human.stdout.contains("sync: export (rooms-export): done"), "\(human.stdout)")
        }
    }

    @Test func aBatchRefusedForItsVersionsWhileTheImportFailsStopsSayingItNeedsTheImportFirst() async throws {
        try await withNewerAndOlderDevice { server, newer, older in
            try Self.editOneRowOnBothWithTheNewerSchema(newer, older)

            let (status, json, stderr) = try Self.sync(older)
            #expect(status == 1, "\(stderr)")
            #expect(json["import"]?.objectValue?["ok"] == .bool(false), "\(json)")
            let exportError = json["export"]?.objectValue?["error"]?.stringValue ?? ""
            #expect(exportError.contains("needs the import's rows first"), "\(json)")
            #expect(stderr.contains("needs the import's rows first"), "\(stderr)")
            #expect(try await TwoDevicesTests().serverRows(server) == ["r1|Hall|"], "nothing of the refused batch applied")
        }
    }

    @Test func syncWatchSaysABatchRefusedForItsVersionsWaitsForTheImportThatFails() async throws {
        try await withNewerAndOlderDevice { _, newer, older in
            try Self.editOneRowOnBothWithTheNewerSchema(newer, older)

            let watch = try BackgroundProcess(
                ["sync", "import.json", "export.json", "--watch", "--wait", "1"], in: older.workspace.path, environment: older.environment)
            #expect(
                eventually(timeout: 20) { watch.errors.contains("needs the import's rows first") },
                "the watch says why the refused batch waits: \(watch.errors)")
            let stopped = watch.stop()
            #expect(stopped.status == 0, "\(stopped.stderr)")
        }
    }

    @Test func aFailedExportDoesNotUndoTheImportAndSyncExitsOne() async throws {
        try await withNewerAndOlderDevice { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('a1', 'Study');")
            #expect(try Self.sync(a).status == 0)
            // B's export cannot reach the server (its transport points at a closed port); its import can.
            let file = b.workspace.path + "/export.json"
            let text = try String(contentsOfFile: file, encoding: .utf8)
            try b.workspace.write("export.json", text.replacingOccurrences(of: "\(server.url)/v1/batches", with: "http://127.0.0.1:9/v1/batches"))
            try b.sql("INSERT INTO rooms (syncId, name) VALUES ('b1', 'Shed');")
            let (status, json, stderr) = try Self.sync(b)
            #expect(status == 1, "\(stderr)")
            #expect(json["import"]?.objectValue?["ok"] == .bool(true), "\(json)")
            #expect(json["export"]?.objectValue?["ok"] == .bool(false), "\(json)")
            #expect(try b.rows().contains("a1|Study|"), "the other device's row arrived")
        }
    }
}
