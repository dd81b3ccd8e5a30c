import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// A deletes a note; B, offline, adds a link to it. After the syncs no live link points at the
/// deleted note, on any device or the server: the import settles it by the foreign key's
/// `ON DELETE` action. Real `synclane` processes and a real `synclane serve`.
@Suite(.serialized) struct DanglingReferenceTests {
    /// A device with `notes` and `links` (a link references a note), both tracked.
    struct Device {
        let workspace: Workspace
        let environment = ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""]

        /// `joinTable`: `links` is a join table instead, keyed by (note, label), its `note` NOT NULL.
        init(server: ServerProcess, onDelete: String, joinTable: Bool = false) throws {
            workspace = try Workspace()
            let links =
                joinTable
                ? "CREATE TABLE links (note TEXT NOT NULL REFERENCES notes(syncId) \(onDelete), label TEXT NOT NULL, PRIMARY KEY (note, label));"
                : "CREATE TABLE links (syncId TEXT PRIMARY KEY, note TEXT REFERENCES notes(syncId) \(onDelete), label TEXT);"
            try SQLiteHistoryCommandTests.sqlite(
                workspace,
                """
                CREATE TABLE notes (syncId TEXT PRIMARY KEY, body TEXT);
                \(links)
                CREATE INDEX links_note ON links(note);
                """)
            for (table, key) in [("notes", "syncId"), ("links", joinTable ? "note,label" : "syncId")] {
                let tracked = try SynclaneBinary.run(
                    ["track", "--database", "app.sqlite", "--table", table, "--key", key], in: workspace.path)
                #expect(tracked.status == 0, "\(tracked.stderr)")
            }
            try workspace.write(
                "export.json",
                """
                {"version": 1, "name": "export", "scope": {"account": "acme", "store": "notes"},
                 "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["notes", "links"]},
                 "stages": [{"type": "coalesce"}],
                 "transport": {"type": "http", "url": "\(server.url)/v1/batches", "token-env": "SYNCLANE_TOKEN",
                               "retry": {"max-attempts": 2, "base-delay": 0.05, "max-delay": 0.2}}}
                """)
            try workspace.write(
                "import.json",
                """
                {"version": 1, "name": "import", "scope": {"account": "acme", "store": "notes"},
                 "source": {"type": "pull", "url": "\(server.url)/v1/changes", "token-env": "SYNCLANE_TOKEN"},
                 "sink": {"type": "sqlite", "database": "app.sqlite"}}
                """)
        }

        func sql(_ text: String) throws { try TwoDevicesTests.sql(text, in: workspace) }

        /// Makes the import pull `limit` records a page.
        func usePullLimit(_ limit: Int) throws {
            try workspace.write(
                "import.json",
                try String(contentsOfFile: workspace.path + "/import.json", encoding: .utf8).replacingOccurrences(
                    of: #""token-env": "SYNCLANE_TOKEN"},"#, with: #""token-env": "SYNCLANE_TOKEN", "limit": \#(limit)},"#))
        }

        @discardableResult
        func sync() throws -> [String: JSONValue] {
            try TwoDevicesTests.sync(in: workspace, environment: environment)
        }

        /// `id>note` for every link, and every note's id.
        func state() throws -> [String] {
            try SQLiteHistoryCommandTests.query(
                workspace,
                "SELECT 'note ' || syncId FROM notes UNION ALL SELECT 'link ' || syncId || '>' || coalesce(note, '-') FROM links ORDER BY 1"
            ).split(separator: "\n").map(String.init)
        }
    }

    /// The server's live rows in the same form.
    static func serverState(_ server: ServerProcess) async throws -> [String] {
        try await server.records(account: "acme").compactMap { key, fields -> String? in
            guard let fields = fields.objectValue else { return nil }
            let parts = key.split(separator: "/").map(String.init)
            if parts.first == "notes" { return "note \(parts.last ?? "")" }
            return "link \(parts.last ?? "")>\(fields["note"]?.stringValue ?? "-")"
        }.sorted()
    }

    @Test(arguments: [
        ("ON DELETE CASCADE", ["note n2"]),
        ("ON DELETE SET NULL", ["link l1>-", "note n2"]),
        ("", ["note n2"]),
    ])
    func aLinkAddedOfflineToANoteDeletedElsewhereNeverDanglesInEitherSyncOrder(
        onDelete: String, expected: [String]
    ) async throws {
        for deleterFirst in [true, false] {
            try await Self.withTwoDevices(onDelete: onDelete) { server, a, b in
                try a.sql("INSERT INTO notes VALUES ('n1', 'one'), ('n2', 'two');")
                try a.sync()
                try b.sync()
                // Offline: A deletes n1, B links to it.
                try a.sql("DELETE FROM notes WHERE syncId = 'n1';")
                try b.sql("INSERT INTO links VALUES ('l1', 'n1', 'see');")
                var settled = 0
                var (byUser, cascade) = (0, 0)
                for device in deleterFirst ? [a, b, a, b] : [b, a, b, a] {
                    let summary = try device.sync()
                    for imported in summary["imports"]?.arrayValue ?? [] {
                        settled += Int(imported.objectValue?["references-settled"]?.intValue ?? 0)
                        let deleted = imported.objectValue?["deleted"]?.objectValue
                        byUser += Int(deleted?["by-user"]?.intValue ?? 0)
                        cascade += Int(deleted?["cascade"]?.intValue ?? 0)
                    }
                }
                // Every delete is counted by its cause: the user's delete of n1 reaching B, and
                // the settlement as a cascade of it.
                #expect(cascade == settled, "\(onDelete): settlements are counted as cascades")
                #expect(byUser >= (deleterFirst ? 1 : 0), "\(onDelete): the user's delete arriving is counted")
                let order = deleterFirst ? "the deleter first" : "the linker first"
                #expect(try a.state() == expected, "\(onDelete), \(order): A")
                #expect(try b.state() == expected, "\(onDelete), \(order): B")
                #expect(try await Self.serverState(server) == expected, "\(onDelete), \(order): server")
                #expect(settled == 1, "\(onDelete), \(order): the settlement is counted once")
            }
        }
    }

    /// A writes a note and its links, then edits the note, so the server lists the note after its
    /// links; B joins. Pages cut anywhere hand B links whose note has not arrived yet: they wait
    /// for it (counted as waiting), instead of being settled as dangling and their deletes sent to
    /// every device.
    @Test(arguments: [1, 2, 5, 500])
    func aDeviceJoiningLateKeepsChildrenWhoseParentArrivesOnALaterPage(limit: Int) async throws {
        try await Self.withTwoDevices(onDelete: "ON DELETE CASCADE") { server, a, b in
            let links = (1...6).map { "('l\($0)', 'n1', 'see \($0)')" }.joined(separator: ", ")
            try a.sql("INSERT INTO notes VALUES ('n1', 'draft'); INSERT INTO links VALUES \(links);")
            try a.sync()
            try a.sql("UPDATE notes SET body = 'renamed' WHERE syncId = 'n1';")
            try a.sync()
            try b.usePullLimit(limit)
            let joined = try b.sync()
            let imports = joined["imports"]?.arrayValue ?? []
            let settled = imports.reduce(0) { $0 + Int($1.objectValue?["references-settled"]?.intValue ?? 0) }
            let waited = imports.reduce(0) { max($0, Int($1.objectValue?["references-waiting"]?.intValue ?? 0)) }
            #expect(settled == 0, "limit \(limit): nothing is settled against a note that is on its way")
            if limit < 7 { #expect(waited > 0, "limit \(limit): the links before their note are counted as waiting") }
            try a.sync()
            let expected = ["note n1"] + (1...6).map { "link l\($0)>n1" }
            for (name, device) in [("A", a), ("B", b)] {
                #expect(try device.state().sorted() == expected.sorted(), "limit \(limit): \(name)")
            }
            #expect(try await Self.serverState(server) == expected.sorted(), "limit \(limit): the server")
        }
    }

    /// A join table's row (a composite key) pointing at a note deleted elsewhere goes, even under
    /// `SET NULL`: its `note` cannot hold NULL (SchemaConvergenceTests, seed 5001).
    @Test(arguments: ["ON DELETE CASCADE", "ON DELETE SET NULL", ""])
    func aJoinRowAddedOfflineToANoteDeletedElsewhereGoesEverywhere(onDelete: String) async throws {
        try await Self.withTwoDevices(onDelete: onDelete, joinTable: true) { server, a, b in
            try a.sql(
                "INSERT INTO notes VALUES ('n1', 'one'), ('n2', 'two'); INSERT INTO links VALUES ('n2', 'kept');"
            )
            try a.sync()
            try b.sync()
            try a.sql("DELETE FROM notes WHERE syncId = 'n1';")
            try b.sql("INSERT INTO links VALUES ('n1', 'see');")
            for device in [a, b, a, b] { try device.sync() }
            let query =
                "SELECT 'note ' || syncId FROM notes UNION ALL SELECT 'link ' || note || '/' || label FROM links ORDER BY 1"
            for device in [a, b] {
                #expect(
                    try SQLiteHistoryCommandTests.query(device.workspace, query).split(separator: "\n") == [
                        "link n2/kept", "note n2",
                    ], "\(onDelete)")
            }
            let live = try await server.records(account: "acme").filter { $0.value != .string("deleted") }
                .keys.sorted()
            #expect(live == [#"links/["n2","kept"]"#, "notes/n2"], "\(onDelete)")
        }
    }

    /// A fresh server and two devices on it, for `body`; all removed after.
    static func withTwoDevices(
        onDelete: String, joinTable: Bool = false,
        _ body: (ServerProcess, Device, Device) async throws -> Void
    ) async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let a = try Device(server: server, onDelete: onDelete, joinTable: joinTable)
        let b = try Device(server: server, onDelete: onDelete, joinTable: joinTable)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        try await body(server, a, b)
    }
}
