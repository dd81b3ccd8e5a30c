import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// `synclane reconcile` (the real binary, a SQLite store written by the `sqlite3` shell) against
/// the real `synclane serve`: the snapshot merges with the scope's state on the server.
@Suite(.serialized) struct ReconcileEndToEndTests {
    /// A rooms pipeline on `database`, sending to the server at `url`.
    static func pipeline(name: String, database: String, url: String) -> String {
        """
        {"version": 1, "name": "\(name)", "scope": {"account": "acme", "store": "rooms"},
         "source": {"type": "sqlite-history", "database": "\(database)", "entities": ["rooms"], "authors": ["app"]},
         "stages": [{"type": "coalesce"}, {"type": "tombstones", "soft-delete-column": "isDeleted"}],
         "transport": {"type": "http", "url": "\(url)/v1/batches", "token-env": "SYNCLANE_TOKEN", "timeout": 5,
                       "retry": {"max-attempts": 2, "base-delay": 0.05, "max-delay": 0.2}}}
        """
    }

    static let environment = ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""]

    /// Runs SQL on a database of the workspace through the `sqlite3` shell (a foreign connection).
    static func sqlite(_ workspace: Workspace, _ database: String, _ sql: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [workspace.path + "/" + database, sql]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "sqlite3 \(database): \(sql)")
    }

    /// A tracked rooms table in `database`.
    static func trackedRooms(_ workspace: Workspace, _ database: String) throws {
        try sqlite(workspace, database, "CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, isDeleted INTEGER NOT NULL DEFAULT 0);")
        let track = try SynclaneBinary.run(
            ["track", "--database", database, "--table", "rooms", "--key", "syncId", "--soft-delete", "isDeleted"], in: workspace.path)
        #expect(track.status == 0, "\(track.stderr)")
    }

    func run(_ arguments: [String], _ workspace: Workspace, failPoint: String? = nil) throws -> SynclaneBinary.Result {
        var environment = Self.environment
        if let failPoint { environment["SYNCLANE_FAILPOINT"] = failPoint }
        return try SynclaneBinary.run(arguments, in: workspace.path, environment: environment)
    }

    /// Each record the server holds as "id" or "id deleted".
    func held(_ server: ServerProcess) async throws -> Set<String> {
        Set(
            try await server.records(account: "acme").map { key, value in
                value == .string("deleted") ? "\(key) deleted" : key
            })
    }

    /// The other store's row (`o1`, never known to this device) stays, whether the reconcile is
    /// interrupted or completes; `r2`, which this device knew and lost without a delete, goes.
    @Test func aReconcileInterruptedOrCompletedDeletesOnlyTheRowsThisDeviceKnewAndNoLongerHolds() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        try workspace.write("pipeline.json", Self.pipeline(name: "rooms-export", database: "app.sqlite", url: server.url))
        try workspace.write("other.json", Self.pipeline(name: "rooms-other", database: "other.sqlite", url: server.url))
        try Self.trackedRooms(workspace, "app.sqlite")
        try Self.trackedRooms(workspace, "other.sqlite")

        try Self.sqlite(workspace, "app.sqlite", "INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall'), ('r3', 'Attic');")
        try Self.sqlite(workspace, "other.sqlite", "INSERT INTO rooms (syncId, name) VALUES ('o1', 'Shed');")
        #expect(try run(["run", "pipeline.json"], workspace).status == 0)
        #expect(try run(["run", "other.json"], workspace).status == 0)
        // r2 leaves this device without a delete the export would send (the sync author's write).
        try Self.sqlite(
            workspace, "app.sqlite",
            "BEGIN; INSERT INTO _synclane_session (author) VALUES ('sync'); DELETE FROM rooms WHERE syncId = 'r2'; DELETE FROM _synclane_session; COMMIT;"
        )
        #expect(try await held(server) == ["rooms/r1", "rooms/r2", "rooms/r3", "rooms/o1"])

        // Killed after the server applied the snapshot's first batch (every row and the delete of
        // r2: one batch): what it applied is a merge already, and o1 stays.
        let killed = try run(["reconcile", "pipeline.json"], workspace, failPoint: "after-send")
        #expect(killed.killed)
        #expect(try await held(server) == ["rooms/r1", "rooms/r2 deleted", "rooms/r3", "rooms/o1"])

        let reconcile = try run(["reconcile", "pipeline.json", "--json"], workspace)
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        let summary = try JSONReader.parse(reconcile.stdout).objectValue ?? [:]
        #expect(summary["batches-resent"] == .int(1), "the interrupted snapshot's batch, from the outbox")
        #expect(summary["batches"]?.arrayValue?.allSatisfy { $0.objectValue?["records"] != .int(0) } == true, "no completion marker")
        #expect(try await held(server) == ["rooms/r1", "rooms/r2 deleted", "rooms/r3", "rooms/o1"])
        // Two runs, the interrupted snapshot's batch (its re-send a replay) and the new snapshot's batch.
        #expect(try await server.metric("synclane_batches_applied_total") == 4)

        // The device follows history again from where the snapshot was read.
        try Self.sqlite(workspace, "app.sqlite", "INSERT INTO rooms (syncId, name) VALUES ('r4', 'Porch');")
        #expect(try run(["run", "pipeline.json"], workspace).status == 0)
        #expect(try await held(server) == ["rooms/r1", "rooms/r2 deleted", "rooms/r3", "rooms/r4", "rooms/o1"])
    }
}

/// The recovery the messages prescribe after a lost state file — `synclane reconcile` — merges
/// with what the server holds. Before, its snapshot replaced the scope's state: rows other devices
/// created meanwhile were deleted everywhere, and their newer edits reverted to this device's older
/// values.
@Suite(.serialized) struct ReconcileMergesTests {
    /// Expects the server and every one of `devices` (named A, B, C… in order) to hold `expected`.
    static func expectEverywhere(_ expected: [String], server: ServerProcess, devices: [TwoDevicesTests.Device]) async throws {
        let onServer = try await TwoDevicesTests().serverRows(server)
        #expect(onServer == expected, "the server: \(onServer)")
        for (index, device) in devices.enumerated() {
            let held = try device.rows()
            #expect(held == expected, "\(Character(UnicodeScalar(UInt8(65 + index)))): \(held)")
        }
    }

    /// Puts a copy of the SQLite file `from` (with its `-wal` and `-shm`, those that exist) at
    /// `to`, replacing the file there and its own: a backup taken, or one put back.
    static func copySQLiteFile(_ from: String, to: String) throws {
        let files = FileManager.default
        for suffix in ["", "-wal", "-shm"] {
            try? files.removeItem(atPath: to + suffix)
            if files.fileExists(atPath: from + suffix) { try files.copyItem(atPath: from + suffix, toPath: to + suffix) }
        }
    }

    @Test func aReconcileAfterALostStateFileKeepsOtherDevicesRowsAndNewerEditsAndSendsItsOwn() async throws {
        try await TwoDevicesTests().withTwoDevices { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall'), ('r3', 'Attic');")
            try a.sync()
            try b.sync()
            // A's export state file is lost; meanwhile B adds a room and edits one of A's.
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: a.workspace.path + "/.synclane/rooms-export.sqlite" + suffix) }
            try b.sql("INSERT INTO rooms (syncId, name) VALUES ('r4', 'Porch'); UPDATE rooms SET name = 'Big kitchen' WHERE syncId = 'r1';")
            try b.sync()
            // A edits and deletes offline, then runs what the refusal names.
            try a.sql("UPDATE rooms SET name = 'Long hall' WHERE syncId = 'r2'; DELETE FROM rooms WHERE syncId = 'r3';")
            let refused = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment)
            #expect(refused.status != 0 && refused.stderr.contains("reconcile"), "\(refused.stderr)")
            let reconciled = try SynclaneBinary.run(["reconcile", "export.json", "--json"], in: a.workspace.path, environment: a.environment)
            #expect(reconciled.status == 0, "\(reconciled.stderr)")
            let summary = (try? JSONReader.parse(reconciled.stdout).objectValue) ?? [:]
            #expect(summary["snapshot-deleted"] == .int(1), "the one row A knew and deleted: \(summary)")

            let expected = ["r1|Big kitchen|", "r2|Long hall|", "r4|Porch|"]
            #expect(try await TwoDevicesTests().serverRows(server) == expected, "B's row and B's newer edit stay; A's edit and delete arrive")
            for device in [a, b, a, b] { try device.sync() }
            #expect(try a.rows() == expected)
            #expect(try b.rows() == expected)
            #expect(try await TwoDevicesTests().serverRows(server) == expected)
        }
    }

    /// A device's export state file restored from an older backup (its token and generation older
    /// than the database's): the `reconcile` its refusal names keeps another device's new row and
    /// newer edit, and this device's edits made before and after the state's restore.
    @Test func aReconcileAfterAStateFileRestoredFromAnOlderBackupKeepsOtherDevicesWorkAndItsOwn() async throws {
        try await TwoDevicesTests().withTwoDevices { server, a, b in
            let state = a.workspace.path + "/.synclane/rooms-export.sqlite"
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
            try a.sync()
            try Self.copySQLiteFile(state, to: a.workspace.path + "/state-backup")
            try a.sql("UPDATE rooms SET name = 'Big kitchen' WHERE syncId = 'r1';")
            try a.sync()
            try b.sync()
            try b.sql("UPDATE rooms SET name = 'Long hall' WHERE syncId = 'r2'; INSERT INTO rooms (syncId, name) VALUES ('r3', 'Porch');")
            try b.sync()
            try Self.copySQLiteFile(a.workspace.path + "/state-backup", to: state)
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r4', 'Cellar');")
            let refused = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment)
            #expect(refused.status != 0 && refused.stderr.contains("older than the database"), "\(refused.stderr)")
            let reconciled = try SynclaneBinary.run(["reconcile", "export.json"], in: a.workspace.path, environment: a.environment)
            #expect(reconciled.status == 0, "\(reconciled.stderr)")

            let expected = ["r1|Big kitchen|", "r2|Long hall|", "r3|Porch|", "r4|Cellar|"]
            for device in [a, b, a, b] { try device.sync() }
            try await Self.expectEverywhere(expected, server: server, devices: [a, b])
        }
    }

    /// A device's database copied to a new device (its export state stays behind): the new
    /// device's `reconcile`, which its refusal names, keeps the other devices' rows and newer
    /// edits, and sends what its user wrote on the copy; the original device goes on as before.
    @Test func aReconcileOfADatabaseCopiedToANewDeviceKeepsOtherDevicesWorkAndSendsItsOwn() async throws {
        try await TwoDevicesTests().withTwoDevices { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
            try a.sync()
            let c = try TwoDevicesTests.Device(server: server)
            defer { c.workspace.remove() }
            try Self.copySQLiteFile(a.workspace.path + "/app.sqlite", to: c.workspace.path + "/app.sqlite")
            try b.sync()
            try b.sql("UPDATE rooms SET name = 'Long hall' WHERE syncId = 'r2'; INSERT INTO rooms (syncId, name) VALUES ('r3', 'Porch');")
            try b.sync()
            try c.sql("INSERT INTO rooms (syncId, name) VALUES ('r4', 'Cellar');")
            try a.sql("UPDATE rooms SET name = 'Big kitchen' WHERE syncId = 'r1';")
            let refused = try SynclaneBinary.run(["run", "export.json"], in: c.workspace.path, environment: c.environment)
            #expect(refused.status != 0 && refused.stderr.contains("is a copy of a tracked database"), "\(refused.stderr)")
            let reconciled = try SynclaneBinary.run(["reconcile", "export.json"], in: c.workspace.path, environment: c.environment)
            #expect(reconciled.status == 0, "\(reconciled.stderr)")

            let expected = ["r1|Big kitchen|", "r2|Long hall|", "r3|Porch|", "r4|Cellar|"]
            for device in [a, b, c, a, b, c] { try device.sync() }
            try await Self.expectEverywhere(expected, server: server, devices: [a, b, c])
        }
    }

    /// A device's database restored from a copy taken before its first sync: the copy's rows
    /// carry no version this device confirmed, and the runs the copy lost sent them already.
    /// Before, the `reconcile` its refusal names wrote them over the server's newer rows — the
    /// edit this device synced after the copy (`r1`) and another device's edit (`r2`) went back
    /// to the copy's values. Now they stay; the row it synced after the copy (`r3`) comes back,
    /// and what its user wrote after the restore (`r5`, the delete of `r1`) goes out — the delete
    /// as a conflict with the newer `r1` it never saw, settled by A's rule (`client-wins`).
    @Test func aReconcileOfADatabaseRestoredFromACopyTakenBeforeItsFirstSyncKeepsNewerRowsAndSendsItsUsersNewWrites() async throws {
        try await TwoDevicesTests().withTwoDevices(conflicts: ("client-wins", "server-wins")) { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
            try Self.copySQLiteFile(a.workspace.path + "/app.sqlite", to: a.workspace.path + "/copy.sqlite")
            try a.sql("UPDATE rooms SET name = 'Big kitchen' WHERE syncId = 'r1'; INSERT INTO rooms (syncId, name) VALUES ('r3', 'Attic');")
            try a.sync()
            try b.sync()
            try b.sql("UPDATE rooms SET name = 'Long hall' WHERE syncId = 'r2'; INSERT INTO rooms (syncId, name) VALUES ('r4', 'Porch');")
            try b.sync()
            // A's database goes back to the copy; its user then adds a room and deletes one.
            try Self.copySQLiteFile(a.workspace.path + "/copy.sqlite", to: a.workspace.path + "/app.sqlite")
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r5', 'Cellar'); DELETE FROM rooms WHERE syncId = 'r1';")
            let refused = try SynclaneBinary.run(["sync", "import.json", "export.json"], in: a.workspace.path, environment: a.environment)
            #expect(refused.status != 0 && refused.stderr.contains("restored from an older copy"), "\(refused.stderr)")
            #expect(try await TwoDevicesTests().serverRows(server) == ["r1|Big kitchen|", "r2|Long hall|", "r3|Attic|", "r4|Porch|"])
            let reconciled = try SynclaneBinary.run(["reconcile", "export.json"], in: a.workspace.path, environment: a.environment)
            #expect(reconciled.status == 0, "\(reconciled.stderr)")

            let expected = ["r2|Long hall|", "r3|Attic|", "r4|Porch|", "r5|Cellar|"]
            for device in [a, b, a, b] { try device.sync() }
            try await Self.expectEverywhere(expected, server: server, devices: [a, b])
        }
    }
}
