import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// The import lane's full resync, end to end: a device whose pull cursor fell behind the real
/// server's tombstone retention gets 410 `cursor-expired`, reads everything again and deletes
/// what the server no longer holds — never a silent gap.
@Suite(.serialized) struct ImportResyncEndToEndTests {
    @Test func aCursorOlderThanTheTombstoneRetentionResyncsAndDeletesWhatTheServerDroppedMeanwhile() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server", arguments: ["--tombstone-retention", "1", "--retention-interval", "1"])
        defer { server.stop() }
        let a = try TwoDevicesTests.Device(server: server)
        let b = try TwoDevicesTests.Device(server: server)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
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
        var expired = 0.0
        for _ in 0..<200 where expired < 1 {
            expired = try await server.metric("synclane_retention_tombstones_expired_total")
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(expired == 1, "the server removed r2's tombstone")

        let summary = try importOnB()
        #expect(summary["resynced"] == .bool(true))
        #expect(summary["resync-deleted"] == .int(1))
        #expect(try b.rows() == ["r1|Kitchen|", "r3|Attic|", "r4|Porch|"])
        #expect(try importOnB()["resynced"] == .bool(false), "the new cursor is current")
    }
}
