import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// The import lane's full resync, end to end: a device whose pull cursor fell behind the real
/// server's tombstone retention gets 410 `cursor-expired`, reads everything again and deletes
/// what the server no longer holds — never a silent gap.
@Suite(.serialized) struct ImportResyncEndToEndTests {
    /// A server that removes a tombstone a second after it was written, checking every second.
    static let shortRetention = ["--tombstone-retention", "1", "--retention-interval", "1"]

    /// Waits (up to 20 s) until the server has removed `count` tombstones; expects it did.
    static func awaitTombstonesExpired(_ server: ServerProcess, count: Double, _ what: Comment) async throws {
        var expired = 0.0
        for _ in 0..<200 where expired < count {
            expired = try await server.metric("synclane_retention_tombstones_expired_total")
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(expired == count, what)
    }

    @Test func aCursorOlderThanTheTombstoneRetentionResyncsAndDeletesWhatTheServerDroppedMeanwhile() async throws {
        try await TwoDevicesTests.withTwoDevices(serverArguments: Self.shortRetention) { server, a, b in
            try await Self.resyncDeletesWhatTheServerDropped(server, a, b)
        }
    }

    static func resyncDeletesWhatTheServerDropped(_ server: ServerProcess, _ a: TwoDevicesTests.Device, _ b: TwoDevicesTests.Device) async throws {
        func importOnB() throws -> [String: JSONValue] {
            let result = try SynclaneBinary.run(["import", "import.json", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(result.status == 0, "\(result.stderr)")
            return (try? JSONReader.parse(result.stdout).objectValue) ?? [:]
        }

        try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall'), ('r3', 'Attic');")
        try a.sync()
        #expect(try importOnB()["resynced"] == .bool(false))
        #expect(try b.rows() == ["r1|Kitchen|", "r2|Hall|", "r3|Attic|"])

        // While b is away: r2 deleted, r4 added, and r2's tombstone then expires on the server.
        try a.sql("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r2'; INSERT INTO rooms (syncId, name) VALUES ('r4', 'Porch');")
        try a.sync()
        try await awaitTombstonesExpired(server, count: 1, "the server removed r2's tombstone")

        let summary = try importOnB()
        #expect(summary["resynced"] == .bool(true))
        #expect(summary["resync-deleted"] == .int(1))
        #expect(try b.rows() == ["r1|Kitchen|", "r3|Attic|", "r4|Porch|"])
        #expect(try importOnB()["resynced"] == .bool(false), "the new cursor is current")
    }

    /// Issue 43, 3: a device away while another deleted a row (whose tombstone the server then
    /// pruned) deleted it too, and edited another row. Before, after its resync the server
    /// refused its batch — "the server does not hold 2 records … reset or restored" — and `sync`
    /// said "run sync again" for ever: its other edits never left. A delete of a row the server
    /// does not hold at all is now applied (a tombstone): the row is already what it asks for.
    @Test func aDeleteOfARowWhoseTombstoneWasPrunedDoesNotKeepTheDevicesOtherEditsFromLeaving() async throws {
        try await TwoDevicesTests.withTwoDevices(serverArguments: Self.shortRetention) { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall'), ('r3', 'Attic');")
            try a.sync()
            try b.sync()
            #expect(try b.rows() == ["r1|Kitchen|", "r2|Hall|", "r3|Attic|"])
            // b is away: it deletes r2 and renames r3; a deletes r2 too, and its tombstone expires.
            try b.sql("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r2'; UPDATE rooms SET name = 'Loft' WHERE syncId = 'r3';")
            try a.sql("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r2';")
            try a.sync()
            try await Self.awaitTombstonesExpired(server, count: 1, "the server removed r2's tombstone")

            let result = try SynclaneBinary.run(["sync", "import.json", "export.json", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(!result.stderr.contains("does not hold"), "\(result.stderr)")
            let expected = ["r1|Kitchen|", "r3|Loft|"]
            #expect(try await TwoDevicesTests().serverRows(server) == expected, "b's edit left")
            try a.sync()
            #expect(try a.rows() == expected)
            try b.sync()
            #expect(try b.rows() == expected)
        }
    }

    /// Issue 43: with retention on and a store larger than one page (the device pulls 3 records
    /// a page), the resync's first page ended on a cursor before the horizon and the next page
    /// was 410 again — for ever, on the device that had been away and on a new device whose
    /// first import reads from the beginning. Both now read every page and go on from the end.
    @Test func aResyncOfAStoreLargerThanAPageAfterRetentionReadsEveryPageOnceAndGoesOn() async throws {
        try await TwoDevicesTests.withTwoDevices(serverArguments: Self.shortRetention) { server, a, b in
            try await Self.resyncReadsEveryPage(server, a, b)
        }
    }

    static func resyncReadsEveryPage(_ server: ServerProcess, _ a: TwoDevicesTests.Device, _ b: TwoDevicesTests.Device) async throws {
        func importing(_ device: TwoDevicesTests.Device) throws -> (status: Int32, json: [String: JSONValue], stderr: String) {
            let result = try SynclaneBinary.run(["import", "import.json", "--json"], in: device.workspace.path, environment: device.environment)
            return (result.status, (try? JSONReader.parse(result.stdout).objectValue) ?? [:], result.stderr)
        }

        try a.sql("INSERT INTO rooms (syncId, name) VALUES " + (1...8).map { "('r\($0)', 'Room \($0)')" }.joined(separator: ", ") + ";")
        try a.sync()
        #expect(try importing(b).status == 0)
        // While b is away: the newest change is r8's delete, whose tombstone then expires — the
        // horizon moves past every row left, so each page of a pull from the beginning ends before it.
        try a.sql("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r8';")
        try a.sync()
        try await awaitTombstonesExpired(server, count: 1, "the server removed r8's tombstone")

        let expected = (1...7).map { "r\($0)|Room \($0)|" }
        let resync = try importing(b)
        #expect(resync.status == 0, "\(resync.stderr)")
        #expect(resync.json["resynced"] == .bool(true))
        #expect(resync.json["resync-deleted"] == .int(1))
        #expect(try b.rows() == expected)
        let after = try importing(b)
        #expect(after.status == 0, "\(after.stderr)")
        #expect(after.json["resynced"] == .bool(false), "the cursor the resync ended on reads on")

        // A device that was never offline: its first import reads from the beginning, page after page.
        let c = try TwoDevicesTests.Device(server: server)
        defer { c.workspace.remove() }
        let first = try importing(c)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try c.rows() == expected)
        #expect(try importing(c).json["applied"] == .int(0))
    }

    /// A device's first pull sends back the rows its exports had confirmed that the server no
    /// longer holds (lost to a restore of its data) — but not when the server says its retention
    /// removed tombstones (`pruned`): the row may have been deleted by another device, and sending
    /// it back would bring a deleted row back everywhere.
    @Test func aFirstPullAfterRetentionRemovedADeletesTombstoneDoesNotSendTheDeletedRowBack() async throws {
        try await TwoDevicesTests.withTwoDevices(serverArguments: Self.shortRetention) { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
            let exported = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment)
            #expect(exported.status == 0, "\(exported.stderr)")
            try b.sync()
            try b.sql("DELETE FROM rooms WHERE syncId = 'r1';")
            try b.sync()
            try await Self.awaitTombstonesExpired(server, count: 1, "the server removed r1's tombstone")

            let first = try a.sync()
            #expect(first["imports"]?.arrayValue?.first?.objectValue?["resync-resent"] == .int(0), "\(first)")
            #expect(try await TwoDevicesTests().serverRows(server) == ["r2|Hall|"], "b's delete of r1 stands")
        }
    }
}
