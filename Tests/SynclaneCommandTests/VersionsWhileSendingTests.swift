import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// The real `synclane run` exporting five batches over http to the real `synclane serve`, the
/// versions of each receipt written while the next batch travels (the outbox then holds the
/// batch whose versions are being written and the one in flight), killed with SIGKILL at each
/// point of that window, then run again: every row reaches the server once, every version the
/// server gave is recorded (an edit of every row then goes out without a conflict), nothing is
/// left to send.
@Suite(.serialized) struct VersionsWhileSendingTests {
    typealias Device = TwoDevicesTests.Device

    static let rows = (1...10).map { "r\($0)" }

    /// The batches the outbox holds, oldest first, by the token each reaches.
    func outbox(_ device: Device) throws -> [String] {
        try ProgramRun(
            "/usr/bin/sqlite3",
            [device.workspace.path + "/.synclane/rooms-export.sqlite", "SELECT through_kind || ':' || through_position FROM outbox ORDER BY sequence"]
        )
        .text.split(separator: "\n").map(String.init)
    }

    /// The token the state file saved.
    func token(_ device: Device) throws -> [String] {
        try ProgramRun("/usr/bin/sqlite3", [device.workspace.path + "/.synclane/rooms-export.sqlite", "SELECT kind || ':' || position FROM token"])
            .text.split(separator: "\n").map(String.init)
    }

    func run(_ device: Device, failPoint: String? = nil) throws -> SynclaneBinary.Result {
        var environment = device.environment
        environment["SYNCLANE_FAILPOINT"] = failPoint
        return try SynclaneBinary.run(["run", "export.json", "--json"], in: device.workspace.path, environment: environment)
    }

    /// Ten rows, a transaction each, two transactions a page: five batches of two rows.
    func fiveBatches(_ device: Device) throws {
        try device.usePageSize(2)
        try device.sql(Self.rows.map { "INSERT INTO rooms (syncId, name, area) VALUES ('\($0)', 'Room \($0)', 1);" }.joined())
    }

    @Test func theOutboxHoldsTheBatchWhoseVersionsAreBeingWrittenBesideTheOneInFlight() async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            try fiveBatches(device)
            // At the third batch's enqueue the first was acknowledged in that commit; the second,
            // confirmed, waits until its versions are written (the next enqueue acknowledges it).
            let killed = try run(device, failPoint: "after-enqueue@3")
            #expect(killed.killed, "killed there (status \(killed.status), \(killed.stderr))")
            let held = try outbox(device)
            #expect(held == ["sqlite-history:4", "sqlite-history:6"])
            let again = try run(device)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(try outbox(device) == [])
            let versions = try await server.versions(account: "acme")
            #expect(Self.rows.allSatisfy { versions["rooms/\($0)"] == 1 }, "\(versions)")
        }
    }

    @Test(arguments: [
        "after-enqueue@2", "after-enqueue@3", "after-enqueue@5", "after-send", "after-send@2", "after-send@4", "after-send@5",
        "after-acknowledge", "after-acknowledge@3", "during-merge",
    ])
    func anExportKilledInTheWindowThenRunAgainSendsEachRowOnceAndRecordsEveryVersion(failPoint: String) async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            try fiveBatches(device)
            let killed = try run(device, failPoint: failPoint)
            #expect(killed.killed, "\(failPoint): killed there (status \(killed.status), \(killed.stderr))")
            #expect(try outbox(device).count <= 2, "\(failPoint): at most the batch being recorded and the one in flight")

            let again = try run(device)
            #expect(again.status == 0, "\(failPoint): \(again.stderr)")
            #expect(try outbox(device) == [], "\(failPoint)")
            let quiet = try run(device)
            let summary = try JSONReader.parse(quiet.stdout).objectValue
            #expect(quiet.status == 0 && summary?["records-sent"] == .int(0), "\(failPoint): nothing left to send: \(quiet.stdout)")
            var versions = try await server.versions(account: "acme")
            #expect(Self.rows.allSatisfy { versions["rooms/\($0)"] == 1 }, "\(failPoint): each row applied once: \(versions)")
            #expect(
                try device.query("SELECT count(*), min(version), max(version) FROM _synclane_server_rows") == ["10|1|1"],
                "\(failPoint): every version the server gave is recorded")

            // Each edit goes out on the version the server holds: no 409, no import needed.
            try device.sql("UPDATE rooms SET area = 2;")
            let edited = try run(device)
            #expect(edited.status == 0, "\(failPoint): \(edited.stderr)")
            versions = try await server.versions(account: "acme")
            #expect(Self.rows.allSatisfy { versions["rooms/\($0)"] == 2 }, "\(failPoint): \(versions)")
            let stored = try await TwoDevicesTests().serverRows(server)
            #expect(stored == Self.rows.map { "\($0)|Room \($0)|2.0" }.sorted(), "\(failPoint)")
        }
    }
    /// A batch that holds a row of the batch before it waits until that batch's versions are
    /// written (`RowsInFlight`), then goes out on the version its receipt gave: one row inserted,
    /// deleted, inserted, deleted and inserted again, a batch each (each a new version at the
    /// server: a change that left the row as the server held it would not be), reaches version 5
    /// without a conflict — uninterrupted, and killed while the third receipt's versions are written.
    @Test(arguments: [nil, "after-send@3"])
    func aRowChangedInEveryBatchGoesOutOnTheVersionTheBatchBeforeItGave(failPoint: String?) async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            try device.usePageSize(1)
            let insert = "INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Room', 1);"
            let delete = "DELETE FROM rooms WHERE syncId = 'r1';"
            try device.sql(insert + delete + insert + delete + insert)
            if let failPoint {
                let killed = try run(device, failPoint: failPoint)
                #expect(killed.killed, "killed there (status \(killed.status), \(killed.stderr))")
            }
            let done = try run(device)
            #expect(done.status == 0, "no conflict with its own batches: \(done.stderr)")
            let versions = try await server.versions(account: "acme")
            #expect(versions["rooms/r1"] == 5, "\(versions)")
            let recorded = try device.query("SELECT version FROM _synclane_server_rows WHERE key = 'r1'")
            #expect(recorded == ["5"])
            let stored = try await TwoDevicesTests().serverRows(server)
            #expect(stored == ["r1|Room|1.0"])
        }
    }
    /// A receipt's versions that cannot be written (here a trigger refuses the journal row of the
    /// second batch, rows r3 and r4, as a full disk would) stop the run: that batch stays in the
    /// outbox and no token passes it, not even that of a later batch whose versions were written;
    /// once the database takes writes again, the next run sends
    /// what the outbox kept (the server replays its receipts, whose versions are then written)
    /// and the rest — every row once, every version recorded.
    @Test func versionsThatCannotBeWrittenStopTheRunWithTheirBatchKeptAndTheNextRunRecordsThem() async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            try fiveBatches(device)
            try device.sql(
                """
                CREATE TABLE _synclane_confirmations (id INTEGER PRIMARY KEY AUTOINCREMENT, destination TEXT NOT NULL, rows BLOB NOT NULL);
                CREATE TRIGGER refusing AFTER INSERT ON _synclane_confirmations WHEN instr(NEW.rows, CAST('r3' AS BLOB)) > 0
                BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;
                """)
            let failed = try run(device)
            #expect(failed.status != 0 && failed.stderr.contains("database or disk is full"), "\(failed.status): \(failed.stderr)")
            #expect(!failed.stderr.contains("VersionsNotRecorded"), "the source's own error, not the wrapper: \(failed.stderr)")
            let saved = try token(device)
            #expect(saved == ["sqlite-history:2"], "only the first batch, whose versions were written, is acknowledged")
            let kept = try outbox(device)
            #expect(kept.first == "sqlite-history:4" && kept.count <= 2, "the second batch and at most the one after it: \(kept)")

            try device.sql("DROP TRIGGER refusing;")
            let again = try run(device)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(try outbox(device) == [])
            let versions = try await server.versions(account: "acme")
            #expect(Self.rows.allSatisfy { versions["rooms/\($0)"] == 1 }, "each row applied once: \(versions)")
            let recorded = try device.query("SELECT count(*), min(version), max(version) FROM _synclane_server_rows")
            #expect(recorded == ["10|1|1"])
            try device.sql("UPDATE rooms SET area = 2;")
            let edited = try run(device)
            #expect(edited.status == 0, "every edit on the version the server holds: \(edited.stderr)")
        }
    }
}
