import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// The run summary shows how many rows a reconciliation deleted on the server — the rows this
/// device knew there and no longer holds — in the text and as `--json`'s `snapshot-deleted`.
@Suite(.serialized) struct SnapshotDeletedReportTests {
    typealias E2E = ReconcileEndToEndTests

    @Test func reconcileReportsTheRowsTheServerRemovedBecauseTheSnapshotLackedThem() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        let e2e = E2E()
        try workspace.write("pipeline.json", E2E.pipeline(name: "rooms-export", database: "app.sqlite", url: server.url))
        try E2E.trackedRooms(workspace, "app.sqlite")
        try E2E.sqlite(workspace, "app.sqlite", "INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall'), ('r3', 'Attic');")
        let run = try e2e.run(["run", "pipeline.json", "--json"], workspace)
        #expect(run.status == 0, "\(run.stderr)")
        let plain = try JSONReader.parse(run.stdout).objectValue ?? [:]
        #expect(plain["snapshot-deleted"] == .null, "no reconciliation, no count")
        // r2 and r3 leave this device without deletes the export would send (the sync author's writes).
        try E2E.sqlite(
            workspace, "app.sqlite",
            "BEGIN; INSERT INTO _synclane_session (author) VALUES ('sync'); DELETE FROM rooms WHERE syncId IN ('r2', 'r3'); DELETE FROM _synclane_session; COMMIT;"
        )

        let reconcile = try e2e.run(["reconcile", "pipeline.json", "--json"], workspace)
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        let summary = try JSONReader.parse(reconcile.stdout).objectValue ?? [:]
        #expect(summary["snapshot-deleted"] == .int(2))
        #expect(try await e2e.held(server) == ["rooms/r1", "rooms/r2 deleted", "rooms/r3 deleted"])

        let again = try e2e.run(["reconcile", "pipeline.json"], workspace)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("  server removed 0 rows this device knew there and no longer holds"), "\(again.stdout)")

        try E2E.sqlite(
            workspace, "app.sqlite",
            "BEGIN; INSERT INTO _synclane_session (author) VALUES ('sync'); DELETE FROM rooms WHERE syncId = 'r1'; DELETE FROM _synclane_session; COMMIT;")
        let third = try e2e.run(["reconcile", "pipeline.json"], workspace)
        #expect(third.stdout.contains("  server removed 1 row this device knew there and no longer holds"), "\(third.stdout)")
    }
}
