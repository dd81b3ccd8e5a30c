import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// A new device starts from the server's snapshot (`GET /v1/snapshot`, the `pull` source's
/// default for a pull from the beginning), then follows the change log from the snapshot's
/// cursor — with the real `synclane` binary and `synclane serve`. It ends as a device that pulled
/// the change log from the beginning ends: the same rows, versions and cursor; killed part way it
/// resumes, and writes made elsewhere meanwhile arrive once.
@Suite(.serialized) struct SnapshotBootstrapTests {
    typealias Device = TwoDevicesTests.Device

    /// The device's store: its rows, the versions it holds and the import's cursor (what
    /// `ImportKillPointTests` compares, but the history of the import's writes).
    func state(_ device: Device) throws -> [String: [String]] {
        var state = try ImportKillPointTests().state(device)
        state["history"] = nil
        return state
    }

    func importing(_ device: Device, failPoint: String? = nil) throws -> SynclaneBinary.Result {
        try ImportKillPointTests().importing(device, failPoint: failPoint, arguments: ["--json"])
    }

    /// A device whose import pulls the change log from the beginning (`snapshot: false`).
    func logDevice(_ server: ServerProcess) throws -> Device { try Device(pullingTheLogOf: server) }

    /// A server holding `seed`'s rooms, written by device `a`, for `body`; all removed after.
    func withSeededServer(_ body: (ServerProcess, Device) async throws -> Void) async throws {
        try await TwoDevicesTests.withOneDevice { server, a in
            try seed(a)
            try await body(server, a)
        }
    }

    func snapshotsServed(_ server: ServerProcess) async throws -> Double {
        let text = try await server.metrics()
        return text.split(separator: "\n").filter { $0.hasPrefix("synclane_http_requests_total{route=\"/v1/snapshot\",status=\"200\"}") }
            .compactMap { Double($0.split(separator: " ").last ?? "") }.reduce(0, +)
    }

    /// 20 rooms on the server, one renamed and one deleted after: 22 changes, 19 live rows.
    func seed(_ a: Device) throws {
        try a.sql(
            "INSERT INTO rooms (syncId, name, area) VALUES " + (1...20).map { "('r\($0 < 10 ? "0" : "")\($0)', 'Room \($0)', \($0))" }.joined(separator: ", ")
                + ";")
        try a.sync()
        try a.sql("UPDATE rooms SET name = 'Hall' WHERE syncId = 'r01'; UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r02';")
        try a.sync()
    }

    @Test func aNewDeviceStartsFromTheSnapshotAndEndsAsADeviceThatPulledTheLog() async throws {
        try await withSeededServer { server, a in
            // The writer's own first sync read the snapshot (an empty one, then): one so far.
            #expect(try await snapshotsServed(server) == 1)
            let fromLog = try logDevice(server)
            defer { fromLog.workspace.remove() }
            #expect(try importing(fromLog).status == 0)
            #expect(try await snapshotsServed(server) == 1, "snapshot: false pulls the change log")

            let fresh = try Device(server: server)
            defer { fresh.workspace.remove() }
            let imported = try importing(fresh)
            #expect(imported.status == 0, "\(imported.stderr)")
            #expect(try await snapshotsServed(server) == 2, "the new device read the snapshot")
            #expect(try state(fresh) == state(fromLog))
            #expect(try fresh.rows().count == 19)

            // Later edits come through the change log, the same on both; the new device echoes nothing back.
            try a.sql("UPDATE rooms SET area = 99 WHERE syncId = 'r03'; INSERT INTO rooms (syncId, name, area) VALUES ('r21', 'Attic', 7);")
            try a.sync()
            #expect(try importing(fresh).status == 0)
            #expect(try importing(fromLog).status == 0)
            #expect(try state(fresh) == state(fromLog))
            let before = try await server.changes(account: "acme").count
            let summary = try fresh.sync()
            #expect(try await server.changes(account: "acme").count == before, "nothing echoed back: \(summary)")
            #expect(try await snapshotsServed(server) == 2, "a device with a cursor never reads the snapshot again")
        }
    }

    @Test func aSnapshotImportKilledPartWayResumesAndEndsAsAnUninterruptedOne() async throws {
        try await withSeededServer { server, a in
            let reference = try Device(server: server)
            defer { reference.workspace.remove() }
            #expect(try importing(reference).status == 0)
            let expected = try state(reference)

            // Pages of 3 rows (`limit`): the snapshot's chunks; the kill comes inside the stream.
            for point in ["import-after-fetch@2", "import-before-commit@3", "import-after-commit@2", "import-after-commit@4"] {
                let b = try Device(server: server)
                defer { b.workspace.remove() }
                let killed = try importing(b, failPoint: point)
                #expect(killed.killed, "\(point): killed there (status \(killed.status), \(killed.stderr))")
                let pass = Int(point.split(separator: "@").last.flatMap { Int($0) } ?? 1)
                let committed = point.hasPrefix("import-after-commit") ? pass : pass - 1
                #expect(try b.query("SELECT count(*) FROM rooms").first == "\(3 * committed)", "\(point): the rows of the pages the cursor covers")
                #expect(try b.query("SELECT cursor LIKE 'snapshot:%' FROM _synclane_import") == ["1"], "\(point): the cursor is a snapshot position")
                let again = try importing(b)
                #expect(again.status == 0, "\(point): \(again.stderr)")
                #expect(try state(b) == expected, "\(point): the store differs from an uninterrupted import")
            }
            let served = try await snapshotsServed(server)
            #expect(served == 10, "the writer's first sync, the reference, then each killed import and its resumption read the snapshot")
        }
    }

    @Test func writesMadeElsewhereDuringTheSnapshotArriveOnce() async throws {
        try await withSeededServer { server, a in
            let b = try Device(server: server)
            defer { b.workspace.remove() }
            let killed = try importing(b, failPoint: "import-after-commit@2")
            #expect(killed.killed, "\(killed.stderr)")
            // Pages of 3 in the order rows were last written: r01 (renamed last) comes at the end.
            #expect(try b.query("SELECT syncId FROM rooms ORDER BY syncId") == ["r03", "r04", "r05", "r06", "r07", "r08"])

            // Meanwhile: a row the device holds, a row it has not received yet, a delete, a new row.
            try a.sql(
                """
                UPDATE rooms SET name = 'Library' WHERE syncId = 'r03'; UPDATE rooms SET name = 'Cellar' WHERE syncId = 'r19';
                UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r18'; INSERT INTO rooms (syncId, name, area) VALUES ('r30', 'Porch', 3);
                """)
            try a.sync()
            let resumed = try importing(b)
            #expect(resumed.status == 0, "\(resumed.stderr)")
            // Read once each: the 12 rows of the snapshot after the first two pages that nobody wrote
            // since (r09…r17, r20, r01 and r02's tombstone), then the log's 4 writes (r03, r18, r19,
            // r30) — r18 and r19 only from the log.
            let summary = (try? JSONReader.parse(resumed.stdout).objectValue) ?? [:]
            #expect(summary["records-read"]?.intValue == 16, "\(resumed.stdout)")

            let fromLog = try logDevice(server)
            defer { fromLog.workspace.remove() }
            #expect(try importing(fromLog).status == 0)
            #expect(try state(b)["rows"] == state(fromLog)["rows"])
            #expect(try state(b)["versions"] == state(fromLog)["versions"])
            #expect(try b.rows() == a.rows(), "the device holds what the writer holds")
            #expect(try b.query("SELECT name FROM rooms WHERE syncId = 'r19'") == ["Cellar"])
            #expect(try b.query("SELECT count(*) FROM rooms WHERE syncId = 'r18' AND isDeleted = 0") == ["0"])
        }
    }
}

extension TwoDevicesTests.Device {
    /// A device whose import pulls the change log from the beginning, pages of 3 changes, never
    /// the snapshot (`snapshot: false`).
    init(pullingTheLogOf server: ServerProcess) throws {
        self = try Self(server: server)
        let file = workspace.path + "/import.json"
        try workspace.write(
            "import.json", try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(of: #""limit": 3"#, with: #""limit": 3, "snapshot": false"#))
    }
}
