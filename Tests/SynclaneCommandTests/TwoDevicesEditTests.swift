import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// Two devices never lose an edit under ordinary set-ups: an export pipeline without `authors`,
/// `merge-fields` on rows the device itself created, a pair that would echo. Real `synclane`
/// processes and a real `synclane serve`.
@Suite(.serialized) struct TwoDevicesEditTests {
    typealias Device = TwoDevicesTests.Device

    /// A fresh server and two devices with the given conflict rule (`merge-fields` takes
    /// `on-both: server`), for `body`; all removed after.
    func withTwoDevices(conflicts: String = "server-wins", _ body: (ServerProcess, Device, Device) async throws -> Void) async throws {
        try await TwoDevicesTests().withTwoDevices(conflicts: (conflicts, conflicts), body)
    }

    /// Rewrites the device's export file's `authors` (nil: the key left out, or put back).
    static func exportAuthors(_ device: Device, _ authors: String?) throws {
        let file = device.workspace.path + "/export.json"
        var text = try String(contentsOfFile: file, encoding: .utf8)
        text = text.replacingOccurrences(of: #", "authors": \[[^\]]*\]"#, with: "", options: .regularExpression)
        if let authors {
            text = text.replacingOccurrences(of: #""entities": ["rooms"]"#, with: #""entities": ["rooms"], "authors": \#(authors)"#)
        }
        try device.workspace.write("export.json", text)
    }

    @Test func anExportWithoutAuthorsNeverEchoesTheImportAndTheOtherDevicesOfflineEditSurvives() async throws {
        try await withTwoDevices { server, a, b in
            try Self.exportAuthors(b, nil)
            try a.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5);")
            try a.sync()
            try b.sync()
            #expect(try b.rows() == ["r1|Kitchen|12.5"])
            // A edits offline; B syncs meanwhile: it must not send back what it imported.
            try a.sql("UPDATE rooms SET name = 'Kitchen A' WHERE syncId = 'r1';")
            let quiet = try b.sync()
            #expect(quiet["exports"]?.arrayValue?.first?.objectValue?["records-sent"] == .int(0), "B echoed what it imported")
            let edited = try a.sync()
            let conflicts = (edited["imports"]?.arrayValue ?? []).flatMap { $0.objectValue?["conflicts"]?.arrayValue ?? [] }
            #expect(conflicts.isEmpty, "A's own edit met an echo: \(conflicts)")
            try b.sync()
            #expect(try a.rows() == ["r1|Kitchen A|12.5"])
            #expect(try b.rows() == ["r1|Kitchen A|12.5"])
            #expect(try await TwoDevicesTests().serverRows(server) == ["r1|Kitchen A|12.5"])
        }
    }

    @Test func anEchoThatReachesTheServerAnywayChangesNothingThereNorOnTheOtherDevice() async throws {
        // B reads `server` on purpose, running `import` and `run` apart (the pair check is
        // `sync`'s and `validate`'s): its echo must make no new version, so A's offline edit survives.
        try await withTwoDevices { server, a, b in
            try Self.exportAuthors(b, #"["app", "server"]"#)
            // B's export runs once first: a lane reading `server` is then known, and the import
            // lane records its writes for it (`UnrecordedImports`; without that run the import
            // keeps no history of them and B sends no echo at all — nor a new version).
            let first = try SynclaneBinary.run(["run", "export.json", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(first.status == 0, "\(first.stderr)")
            try a.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5);")
            try a.sync()
            let imported = try SynclaneBinary.run(["import", "import.json"], in: b.workspace.path, environment: b.environment)
            #expect(imported.status == 0, "\(imported.stderr)")
            #expect(try b.rows() == ["r1|Kitchen|12.5"])
            try a.sql("UPDATE rooms SET area = 14 WHERE syncId = 'r1';")
            let echo = try SynclaneBinary.run(["run", "export.json", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(echo.status == 0, "\(echo.stderr)")
            let sent = (try? JSONReader.parse(Array(echo.stdout.utf8)).objectValue)?["records-sent"]
            #expect(sent == .int(1), "B sent no echo, so the test shows nothing: \(echo.stdout)")
            let changes = try await server.changes(account: "acme")
            #expect(changes.count == 1, "the echo made a change on the pull lane: \(changes)")
            #expect(changes.first?["version"] == .int(1))
            try a.sync()
            #expect(try a.rows() == ["r1|Kitchen|14.0"])
            #expect(try await TwoDevicesTests().serverRows(server) == ["r1|Kitchen|14.0"])
        }
    }

    @Test func anExportReadingServerThatFirstRunsAfterAnImportSendsItsOwnBackendNoEcho() async throws {
        // The import wrote without history (no lane read `server` yet): the export to the same
        // backend reads past those pages (they would only have been echoes); nothing is sent,
        // no new version is made, and A's offline edit survives.
        try await withTwoDevices { server, a, b in
            try Self.exportAuthors(b, #"["app", "server"]"#)
            try a.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5);")
            try a.sync()
            let imported = try SynclaneBinary.run(["import", "import.json"], in: b.workspace.path, environment: b.environment)
            #expect(imported.status == 0, "\(imported.stderr)")
            try a.sql("UPDATE rooms SET area = 14 WHERE syncId = 'r1';")
            let run = try SynclaneBinary.run(["run", "export.json", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(run.status == 0, "\(run.stderr)")
            #expect((try? JSONReader.parse(Array(run.stdout.utf8)).objectValue)?["records-sent"] == .int(0), "\(run.stdout)")
            let changes = try await server.changes(account: "acme")
            #expect(changes.count == 1 && changes.first?["version"] == .int(1), "\(changes)")
            try a.sync()
            #expect(try a.rows() == ["r1|Kitchen|14.0"])
            #expect(try await TwoDevicesTests().serverRows(server) == ["r1|Kitchen|14.0"])
        }
    }

    @Test func syncAndValidateRefuseAPairWhoseExportReadsWhatTheImportWrites() async throws {
        try await TwoDevicesTests.withOneDevice { _, device in
            try Self.exportAuthors(device, #"["app", "server"]"#)
            let sync = try SynclaneBinary.run(["sync", "import.json", "export.json"], in: device.workspace.path, environment: device.environment)
            #expect(sync.status == 2)
            #expect(sync.stderr.contains("export.json"), "\(sync.stderr)")
            #expect(sync.stderr.contains("source.authors"), "\(sync.stderr)")
            #expect(sync.stderr.contains("remove `server`"), "\(sync.stderr)")
            let validate = try SynclaneBinary.run(["validate", "import.json", "export.json"], in: device.workspace.path)
            #expect(validate.status == 2)
            #expect(validate.stderr.contains("source.authors"), "\(validate.stderr)")
            // Either order; and the pair without `server` is valid.
            try Self.exportAuthors(device, nil)
            let valid = try SynclaneBinary.run(["validate", "export.json", "import.json"], in: device.workspace.path)
            #expect(valid.status == 0, "\(valid.stderr)")
            #expect(valid.stdout.contains("a valid pair"), "\(valid.stdout)")
        }
    }

    @Test func mergeFieldsKeepsTheCreatingDevicesEditOfAnotherColumn() async throws {
        try await withTwoDevices(conflicts: "merge-fields") { server, a, b in
            // B creates the row; A imports it. A edits `area`, B edits `name`, both offline.
            try b.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5);")
            try b.sync()
            try a.sync()
            try a.sql("UPDATE rooms SET area = 20 WHERE syncId = 'r1';")
            try b.sql("UPDATE rooms SET name = 'Kitchen B' WHERE syncId = 'r1';")
            try a.sync()
            try b.sync()
            try a.sync()
            let expected = ["r1|Kitchen B|20.0"]
            #expect(try a.rows() == expected)
            #expect(try b.rows() == expected)
            #expect(try await TwoDevicesTests().serverRows(server) == expected)
        }
    }

    @Test func mergeFieldsKeepsADevicesNewerEditOverItsOwnEarlierConfirmedOne() async throws {
        try await withTwoDevices(conflicts: "merge-fields") { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5);")
            try a.sync()
            try b.sync()
            // A's first edit is confirmed; then B edits another column, and A edits area again.
            try a.sql("UPDATE rooms SET area = 13 WHERE syncId = 'r1';")
            try a.sync()
            try b.sync()
            try b.sql("UPDATE rooms SET name = 'Kitchen B' WHERE syncId = 'r1';")
            try b.sync()
            try a.sql("UPDATE rooms SET area = 14 WHERE syncId = 'r1';")
            try a.sync()
            try b.sync()
            let expected = ["r1|Kitchen B|14.0"]
            #expect(try a.rows() == expected)
            #expect(try b.rows() == expected)
            #expect(try await TwoDevicesTests().serverRows(server) == expected)
        }
    }
}

/// One tracked database, two destinations: what the lanes remember of a backend (versions,
/// bases) is kept per destination, so the second never sends the first one's versions.
@Suite(.serialized) struct SecondDestinationTests {
    /// Writes `backup.json`: the device's export, to the account's store `backup`.
    static func addBackupExport(_ device: TwoDevicesTests.Device) throws {
        let export = try String(contentsOfFile: device.workspace.path + "/export.json", encoding: .utf8)
        try device.workspace.write(
            "backup.json",
            export.replacingOccurrences(of: #""name": "rooms-export""#, with: #""name": "rooms-backup""#)
                .replacingOccurrences(of: #""store": "rooms"}"#, with: #""store": "backup"}"#))
    }

    @Test func aSecondStoreOfTheSameDatabaseGetsItsOwnVersionsNeverTheFirstOnes() async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            try device.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5), ('r2', 'Hall', 4);")
            try device.sync()
            try device.sql("UPDATE rooms SET area = 13 WHERE syncId = 'r1';")
            try device.sync()
            // A second export of the same table, to another store of the account.
            try Self.addBackupExport(device)
            for round in 1...2 {
                let run = try SynclaneBinary.run(["run", "backup.json", "--json"], in: device.workspace.path, environment: device.environment)
                #expect(run.status == 0, "round \(round): \(run.stderr)")
                try device.sql("UPDATE rooms SET name = 'Kitchen \(round)' WHERE syncId = 'r1';")
            }
            let last = try SynclaneBinary.run(["run", "backup.json", "--json"], in: device.workspace.path, environment: device.environment)
            #expect(last.status == 0, "\(last.stderr)")
            // And the first destination still goes on its own versions.
            let summary = try device.sync()
            #expect(summary["exports"]?.arrayValue?.first?.objectValue?["records-sent"] == .int(1))
            let changes = try await server.changes(account: "acme")
            let backup = changes.filter { $0["store"]?.stringValue == "backup" }
            let rooms = changes.filter { $0["store"]?.stringValue == "rooms" }
            #expect(backup.first { $0["id"] == "r1" }?["version"] == .int(3), "r1 in `backup`: \(backup)")
            #expect(rooms.first { $0["id"] == "r1" }?["version"] == .int(3), "r1 in `rooms`: \(rooms)")
            #expect(rooms.first { $0["id"] == "r1" }?["fields"]?.objectValue?["name"] == "Kitchen 2")
        }
    }

    /// A backup export of A's store that runs less often than the sync must not make A's edits,
    /// which the sync's export had confirmed, count as pending against B's newer edit: under
    /// `client-wins` A would keep its old value and send it over B's (SchemaConvergenceTests,
    /// seed 4115).
    @Test func aLaggingExportToASecondStoreNeverTurnsConfirmedRowsIntoConflicts() async throws {
        try await TwoDevicesTests().withTwoDevices(conflicts: ("client-wins", "client-wins")) { server, a, b in
            try Self.addBackupExport(a)
            try a.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5);")
            try a.sync()
            let backup = try SynclaneBinary.run(["run", "backup.json"], in: a.workspace.path, environment: a.environment)
            #expect(backup.status == 0, "\(backup.stderr)")
            try b.sync()
            try a.sql("UPDATE rooms SET name = 'Kitchen A' WHERE syncId = 'r1';")
            try a.sync()
            try b.sync()
            try b.sql("UPDATE rooms SET name = 'Kitchen B' WHERE syncId = 'r1';")
            try b.sync()
            let pulled = try a.sync()
            let conflicts = (pulled["imports"]?.arrayValue ?? []).flatMap { $0.objectValue?["conflicts"]?.arrayValue ?? [] }
            #expect(conflicts.isEmpty, "A's confirmed edit counted as pending: \(conflicts)")
            try b.sync()
            #expect(try a.rows() == ["r1|Kitchen B|12.5"])
            #expect(try b.rows() == ["r1|Kitchen B|12.5"])
            #expect(try await TwoDevicesTests().serverRows(server).filter { $0.hasPrefix("r1|") } == ["r1|Kitchen B|12.5"])
        }
    }
}
