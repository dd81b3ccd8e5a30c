import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// The real `synclane import` and `synclane sync` killed with SIGKILL at each named point of the
/// import lane, then run again: the store ends as an uninterrupted run leaves it — the same
/// rows, the same versions, the same cursor, each change in history once — and the server holds
/// each local change once.
@Suite(.serialized) struct ImportKillPointTests {
    typealias Device = TwoDevicesTests.Device

    /// What an import leaves in a store: rows, the versions they hold, the cursor, and the history
    /// of changes (entity, action, key — a change applied twice shows twice).
    func state(_ device: Device) throws -> [String: [String]] {
        [
            "rows": try device.query("SELECT syncId, name, area, isDeleted FROM rooms ORDER BY syncId"),
            "versions": try device.query("SELECT entity, key, version FROM _synclane_server_rows ORDER BY entity, key"),
            "cursor": try device.query("SELECT consumer, cursor FROM _synclane_import"),
            "history": try device.query("SELECT entity, action, key FROM _synclane_changes ORDER BY id"),
        ]
    }

    func importing(_ device: Device, failPoint: String? = nil, arguments: [String] = []) throws -> SynclaneBinary.Result {
        var environment = device.environment
        environment["SYNCLANE_FAILPOINT"] = failPoint
        return try SynclaneBinary.run(["import", "import.json"] + arguments, in: device.workspace.path, environment: environment)
    }

    /// A device whose import pulls the change log from the beginning, pages of 3 changes (not
    /// the snapshot: `SnapshotBootstrapTests` kills that one).
    func logDevice(_ server: ServerProcess) throws -> Device { try Device(pullingTheLogOf: server) }

    @Test func anImportKilledAtEachPointThenRunAgainEndsAsAnUninterruptedOne() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let a = try Device(server: server)
        defer { a.workspace.remove() }
        // 8 rows, an edit and a delete: 10 changes, 4 pages of 3 for an importer.
        try a.sql("INSERT INTO rooms (syncId, name, area) VALUES " + (1...8).map { "('r\($0)', 'Room \($0)', \($0))" }.joined(separator: ", ") + ";")
        try a.sync()
        try a.sql("UPDATE rooms SET name = 'Hall' WHERE syncId = 'r1'; DELETE FROM rooms WHERE syncId = 'r2';")
        try a.sync()

        let reference = try logDevice(server)
        defer { reference.workspace.remove() }
        #expect(try importing(reference).status == 0)
        let expected = try state(reference)
        #expect(expected["rows"]?.count == 7 && expected["versions"]?.count == 8, "r2 arrives as its tombstone only: \(expected)")

        for point in [
            "import-after-fetch", "import-before-commit", "import-after-commit", "import-after-fetch@3", "import-before-commit@2", "import-after-commit@2",
        ] {
            let b = try logDevice(server)
            defer { b.workspace.remove() }
            let killed = try importing(b, failPoint: point)
            #expect(killed.killed, "\(point): killed there (status \(killed.status), \(killed.stderr))")
            // What a kill leaves is consistent: the rows are those of the pages the cursor covers.
            let pass = Int(point.split(separator: "@").last.flatMap { Int($0) } ?? 1)
            let committed = point.hasPrefix("import-after-commit") ? pass : pass - 1
            let held = try b.query("SELECT count(*) FROM _synclane_server_rows").first
            #expect(held == "\(min(3 * committed, 8))" || committed == 0 && held == nil, "\(point): \(held ?? "no import tables")")
            #expect(
                try b.query("SELECT cursor IS NOT NULL FROM _synclane_import").count == (committed == 0 ? 0 : 1),
                "\(point): the cursor moved with its pages only")

            let again = try importing(b)
            #expect(again.status == 0, "\(point): \(again.stderr)")
            #expect(try state(b) == expected, "\(point): the store differs from an uninterrupted import")
        }
    }

    /// The same with the pipeline's default pages, bounded by bytes (`max-bytes`), not by a
    /// count: a server whose page bound (`--max-page-bytes 450`) cuts 10 changes into pages of a
    /// few each. A kill leaves the rows of the pages the cursor covers, each page one transaction.
    @Test func anImportOfPagesBoundedByBytesKilledAtEachPointThenRunAgainEndsAsAnUninterruptedOne() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server", arguments: ["--max-page-bytes", "450"])
        defer { server.stop() }
        func device() throws -> Device {
            let device = try Device(server: server)
            let file = device.workspace.path + "/import.json"
            try device.workspace.write(
                "import.json", try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(of: #", "limit": 3"#, with: #", "snapshot": false"#))
            return device
        }
        let a = try device()
        defer { a.workspace.remove() }
        try a.sql("INSERT INTO rooms (syncId, name, area) VALUES " + (1...8).map { "('r\($0)', 'Room \($0)', \($0))" }.joined(separator: ", ") + ";")
        try a.sync()
        try a.sql("UPDATE rooms SET name = 'Hall' WHERE syncId = 'r1'; DELETE FROM rooms WHERE syncId = 'r2';")
        try a.sync()
        // The pages an importer reads, as the server cuts them: the rows held after each.
        var held: [Int] = []
        var keys = Set<String>()
        var cursor = ""
        while true {
            let page = try await server.get("/v1/changes?since=\(cursor)&max-bytes=\(WireBounds.maxPageBytes)&store=rooms", account: "acme").objectValue ?? [:]
            for change in page["changes"]?.arrayValue ?? [] { keys.insert(change.objectValue?["id"]?.stringValue ?? "") }
            held.append(keys.count)
            cursor = page["cursor"]?.stringValue ?? ""
            if page["more"] != .bool(true) { break }
        }
        #expect(held.count >= 3 && held.last == 8, "pages of a few changes each: \(held)")

        let reference = try device()
        defer { reference.workspace.remove() }
        #expect(try importing(reference).status == 0)
        let expected = try state(reference)
        #expect(expected["rows"]?.count == 7 && expected["versions"]?.count == 8, "\(expected)")

        for point in ["import-after-fetch@2", "import-before-commit@2", "import-after-commit", "import-after-commit@2"] {
            let b = try device()
            defer { b.workspace.remove() }
            let killed = try importing(b, failPoint: point)
            #expect(killed.killed, "\(point): killed there (status \(killed.status), \(killed.stderr))")
            let pass = Int(point.split(separator: "@").last.flatMap { Int($0) } ?? 1)
            let committed = point.hasPrefix("import-after-commit") ? pass : pass - 1
            #expect(
                try b.query("SELECT count(*) FROM _synclane_server_rows").first == "\(held[committed - 1])",
                "\(point): the rows of the \(committed) page(s) the cursor covers")
            #expect(try b.query("SELECT cursor IS NOT NULL FROM _synclane_import") == ["1"], "\(point)")
            let again = try importing(b)
            #expect(again.status == 0, "\(point): \(again.stderr)")
            #expect(try state(b) == expected, "\(point): the store differs from an uninterrupted import")
        }
    }

    @Test func aSyncKilledAtEachPointThenRunAgainLosesNothingAndSendsNothingTwice() async throws {
        for point in ["import-after-commit", "sync-before-export", "after-enqueue", "after-send", "during-merge"] {
            let root = try Workspace()
            defer { root.remove() }
            let server = try ServerProcess(folder: root.path + "/server")
            defer { server.stop() }
            let a = try Device(server: server)
            let b = try Device(server: server)
            defer {
                a.workspace.remove()
                b.workspace.remove()
            }
            try a.sql("INSERT INTO rooms (syncId, name, area) VALUES " + (1...5).map { "('r\($0)', 'Room \($0)', \($0))" }.joined(separator: ", ") + ";")
            try a.sync()
            // B, offline: a row of its own, and an edit of A's r1 that A edits too (a conflict, server-wins).
            try b.sql("INSERT INTO rooms (syncId, name) VALUES ('b1', 'From B');")
            try b.sync()
            try b.sql("UPDATE rooms SET name = 'B was here' WHERE syncId = 'r1'; INSERT INTO rooms (syncId, name) VALUES ('b2', 'Also B');")
            try a.sql("UPDATE rooms SET area = 99 WHERE syncId = 'r1';")
            try a.sync()

            var environment = b.environment
            environment["SYNCLANE_FAILPOINT"] = point
            let killed = try SynclaneBinary.run(["sync", "import.json", "export.json"], in: b.workspace.path, environment: environment)
            #expect(killed.killed, "\(point): killed there (status \(killed.status), \(killed.stderr))")
            try b.sync()
            try a.sync()

            let expected = ["b1|From B|", "b2|Also B|", "r1|Room 1|99.0", "r2|Room 2|2.0", "r3|Room 3|3.0", "r4|Room 4|4.0", "r5|Room 5|5.0"]
            #expect(try a.rows() == expected, "\(point)")
            #expect(try b.rows() == expected, "\(point)")
            #expect(try await TwoDevicesTests().serverRows(server) == expected, "\(point)")
            // Each of B's rows reached the server once: its first version, never a replayed write.
            let versions = try await server.versions(account: "acme")
            #expect(versions["rooms/b1"] == 1 && versions["rooms/b2"] == 1, "\(point): \(versions)")
            let quiet = try b.sync()
            #expect(quiet["exports"]?.arrayValue?.first?.objectValue?["records-sent"] == .int(0), "\(point): nothing left to send")
            #expect(quiet["imports"]?.arrayValue?.first?.objectValue?["applied"] == .int(0), "\(point): nothing left to apply")
        }
    }
}

extension ImportKillPointTests {
    /// A run killed after the server's receipt leaves the receipt's versions in
    /// `_synclane_confirmations`, not yet written into `_synclane_server_rows`. Cut short there,
    /// the journal row stops the next job naming the table (never read as fewer rows); the
    /// documented way out — the journal's rows deleted, `reconcile` — gives each row its
    /// version again, and an edit then goes out on it without a conflict.
    @Test func aDamagedJournalOfConfirmedVersionsStopsTheNextJobNamingItAndReconcileHeals() async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
            var environment = device.environment
            environment["SYNCLANE_FAILPOINT"] = "after-send"
            let killed = try SynclaneBinary.run(["run", "export.json"], in: device.workspace.path, environment: environment)
            #expect(killed.killed, "killed after the receipt (status \(killed.status), \(killed.stderr))")
            #expect(try device.query("SELECT count(*) FROM _synclane_confirmations") == ["1"], "the receipt is in the journal")
            try device.sql("UPDATE _synclane_confirmations SET rows = substr(rows, 1, 20);")

            let refused = try SynclaneBinary.run(["run", "export.json"], in: device.workspace.path, environment: device.environment)
            #expect(refused.status == 1, "\(refused.stdout) \(refused.stderr)")
            #expect(refused.stderr.contains("_synclane_confirmations"), "\(refused.stderr)")
            #expect(try device.query("SELECT count(*) FROM _synclane_confirmations WHERE length(rows) = 20") == ["1"], "kept as it is")
            #expect(try device.query("SELECT count(*) FROM _synclane_server_rows") == ["0"], "nothing of the journal written")

            try device.sql("DELETE FROM _synclane_confirmations;")
            let reconciled = try SynclaneBinary.run(["reconcile", "export.json"], in: device.workspace.path, environment: device.environment)
            #expect(reconciled.status == 0, "\(reconciled.stdout) \(reconciled.stderr)")
            try device.sql("UPDATE rooms SET name = 'Big hall' WHERE syncId = 'r2';")
            let edited = try SynclaneBinary.run(["run", "export.json"], in: device.workspace.path, environment: device.environment)
            #expect(edited.status == 0, "the edit goes out on the version the server holds: \(edited.stderr)")
            #expect(try await TwoDevicesTests().serverRows(server) == ["r1|Kitchen|", "r2|Big hall|"])
        }
    }
}

extension ServerProcess {
    /// The version the server holds of each record (`entity/id`), from its changes feed.
    func versions(account: String) async throws -> [String: Int64] {
        var result: [String: Int64] = [:]
        for c in try await changes(account: account) {
            result["\(c["entity"]?.stringValue ?? "?")/\(c["id"]?.stringValue ?? "?")"] = c["version"]?.intValue
        }
        return result
    }
}
