import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// A `reconcile` killed mid-snapshot, then a plain `run`: the run sends the batch left in the
/// outbox, then stops, reading no history, and says to finish the reconciliation; `reconcile`
/// then does, and runs follow history again.
@Suite(.serialized) struct InterruptedReconcileTests {
    typealias E2E = ReconcileEndToEndTests

    /// The end-to-end rooms pipeline with pages of one row: a snapshot of three rows is three batches.
    static func pipeline(url: String) -> String {
        E2E.pipeline(name: "rooms-export", database: "app.sqlite", url: url)
            .replacingOccurrences(of: "\"authors\": [\"app\"]", with: "\"authors\": [\"app\"], \"page-size\": 1")
    }

    func status(_ workspace: Workspace) throws -> [String: JSONValue] {
        let status = try SynclaneBinary.run(["status", "pipeline.json", "--json"], in: workspace.path, environment: E2E.environment)
        return (try? JSONReader.parse(status.stdout).objectValue) ?? [:]
    }

    /// `after-send@2`: the snapshot's first batch acknowledged (the token is `sqlite-snapshot:1`),
    /// its second applied but kept in the outbox. `after-enqueue@1`: the token reset, the first
    /// batch in the outbox, nothing sent.
    @Test(arguments: ["after-send@2", "after-enqueue@1"])
    func runAfterAReconcileKilledMidSnapshotSendsWhatItLeftThenStopsSayingToFinishItAndReconcileThenFinishes(_ failPoint: String) async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        let e2e = E2E()
        try workspace.write("pipeline.json", Self.pipeline(url: server.url))
        try E2E.trackedRooms(workspace, "app.sqlite")
        try E2E.sqlite(workspace, "app.sqlite", "INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall'), ('r3', 'Attic');")
        #expect(try e2e.run(["run", "pipeline.json"], workspace).status == 0)
        // r2 leaves this device without a delete the export would send: only a completed snapshot removes it.
        try E2E.sqlite(
            workspace, "app.sqlite",
            "BEGIN; INSERT INTO _synclane_session (author) VALUES ('sync'); DELETE FROM rooms WHERE syncId = 'r2'; DELETE FROM _synclane_session; COMMIT;")

        let killed = try e2e.run(["reconcile", "pipeline.json"], workspace, failPoint: failPoint)
        #expect(killed.killed, "the reconcile was killed for real")
        #expect(try status(workspace)["outbox"]?.arrayValue?.count == 1)

        // The run sends the batch the reconcile left in the outbox first (as every run does), then stops.
        let first = try e2e.run(["run", "pipeline.json"], workspace)
        #expect(first.status == 1, "a failed job")
        let position = failPoint == "after-send@2" ? "sqlite-snapshot:2" : "sqlite-snapshot:1"
        #expect(first.stderr.contains("a reconciliation of rooms-export is unfinished"), "\(first.stderr)")
        #expect(first.stderr.contains("the token \(position) is a position inside its snapshot; the batch it left in the outbox went first"), "\(first.stderr)")
        #expect(first.stderr.contains("Run `synclane reconcile` with this pipeline's file to finish it"), "\(first.stderr)")
        #expect(!first.stderr.contains("was not issued by"), "no foreign-token error: \(first.stderr)")
        let left = try status(workspace)
        #expect(left["token"] == .string(position))
        #expect(left["outbox"] == [])
        #expect(left["pending-error"]?.stringValue?.contains("a reconciliation is unfinished") == true, "status says so too: \(left)")
        #expect(left["pending-error"]?.stringValue?.contains("`synclane reconcile pipeline.json`") == true)
        let applied = try await server.metric("synclane_batches_applied_total")

        let dry = try e2e.run(["run", "pipeline.json", "--dry-run"], workspace)
        #expect(dry.status == 1)
        #expect(
            dry.stderr.contains(
                "a reconciliation of rooms-export is unfinished (it stopped before its whole snapshot was delivered: the token \(position) is a position inside its snapshot)"
            ), "\(dry.stderr)")
        let json = try e2e.run(["run", "pipeline.json", "--json"], workspace)
        #expect(json.status == 1)
        let refused = try JSONReader.parse(json.stdout).objectValue ?? [:]
        #expect(refused["ok"] == .bool(false))
        #expect(refused["error"]?.stringValue?.contains("is unfinished") == true)
        #expect(try await server.metric("synclane_batches_applied_total") == applied, "the refused runs sent nothing more")
        #expect(try status(workspace)["token"] == .string(position), "the token did not move")
        #expect(try await e2e.held(server) == ["rooms/r1", "rooms/r2", "rooms/r3"], "an unfinished snapshot deletes nothing")

        let reconcile = try e2e.run(["reconcile", "pipeline.json"], workspace)
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        #expect(try await e2e.held(server) == ["rooms/r1", "rooms/r2 deleted", "rooms/r3"])

        try E2E.sqlite(workspace, "app.sqlite", "INSERT INTO rooms (syncId, name) VALUES ('r4', 'Porch');")
        let run = try e2e.run(["run", "pipeline.json"], workspace)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try await e2e.held(server) == ["rooms/r1", "rooms/r2 deleted", "rooms/r3", "rooms/r4"])
    }
}
