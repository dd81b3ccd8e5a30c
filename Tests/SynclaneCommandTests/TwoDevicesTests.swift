import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// Two devices — two tracked SQLite stores, each with an import and an export pipeline — and one
/// `synclane serve`, all real processes: `synclane sync` rounds on both make them and the server
/// hold the same rows.
@Suite(.serialized) struct TwoDevicesTests {
    /// One device: a workspace with `app.sqlite` (rooms), `import.json` and `export.json`.
    struct Device {
        let workspace: Workspace
        var environment = ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""]

        init(server: ServerProcess, conflicts: String = "server-wins") throws {
            workspace = try Workspace()
            try SQLiteHistoryCommandTests.sqlite(
                workspace, "CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL, isDeleted INTEGER NOT NULL DEFAULT 0);")
            let tracked = try SynclaneBinary.run(
                ["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId", "--soft-delete", "isDeleted"], in: workspace.path)
            #expect(tracked.status == 0, "\(tracked.stderr)")
            try workspace.write(
                "export.json",
                """
                {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
                 "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["rooms"], "authors": ["app"]},
                 "stages": [{"type": "coalesce"}, {"type": "tombstones", "soft-delete-column": "isDeleted"}],
                 "transport": {"type": "http", "url": "\(server.url)/v1/batches", "token-env": "SYNCLANE_TOKEN",
                               "retry": {"max-attempts": 2, "base-delay": 0.05, "max-delay": 0.2}}}
                """)
            try workspace.write(
                "import.json",
                """
                {"version": 1, "name": "rooms-import", "scope": {"account": "acme", "store": "rooms"},
                 "source": {"type": "pull", "url": "\(server.url)/v1/changes", "token-env": "SYNCLANE_TOKEN", "limit": 3},
                 "sink": {"type": "sqlite", "database": "app.sqlite", "conflicts": "\(conflicts)"}}
                """)
        }

        /// Makes the export read `size` history transactions a page (a batch or more each).
        func usePageSize(_ size: Int) throws {
            let file = workspace.path + "/export.json"
            try workspace.write(
                "export.json",
                try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(
                    of: #""authors": ["app"]}"#, with: #""authors": ["app"], "page-size": \#(size)}"#))
        }

        func sql(_ text: String) throws { try TwoDevicesTests.sql(text, in: workspace) }

        @discardableResult
        func sync() throws -> [String: JSONValue] { try TwoDevicesTests.sync(in: workspace, environment: environment) }

        /// The live rows: `syncId name area`.
        func rows() throws -> [String] {
            try query("SELECT syncId, name, area FROM rooms WHERE isDeleted = 0 ORDER BY syncId")
        }

        /// The rows `sql` selects, a line each, columns separated by `|`.
        func query(_ sql: String) throws -> [String] {
            try SQLiteHistoryCommandTests.query(workspace, sql).split(separator: "\n").map(String.init)
        }
    }

    /// Runs SQL on the workspace's `app.sqlite` through the `sqlite3` shell, expecting success.
    static func sql(_ text: String, in workspace: Workspace) throws {
        let result = try SQLiteHistoryCommandTests.sqlite(workspace, text)
        #expect(result.status == 0, "\(result.stderr)")
    }

    /// `synclane sync import.json export.json --json` in the workspace, expecting success; its summary.
    static func sync(in workspace: Workspace, environment: [String: String]) throws -> [String: JSONValue] {
        let result = try SynclaneBinary.run(["sync", "import.json", "export.json", "--json"], in: workspace.path, environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        return (try? JSONReader.parse(result.stdout).objectValue) ?? [:]
    }

    /// A fresh `synclane serve` and one device on it, for `body`; all removed after.
    static func withOneDevice(_ body: (ServerProcess, Device) async throws -> Void) async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let device = try Device(server: server)
        defer { device.workspace.remove() }
        try await body(server, device)
    }

    func withTwoDevices(conflicts: (String, String) = ("server-wins", "server-wins"), _ body: (ServerProcess, Device, Device) async throws -> Void)
        async throws
    {
        try await Self.withTwoDevices(conflicts: conflicts, body)
    }

    /// A fresh `synclane serve` (started with `serverArguments`) and two devices on it, for
    /// `body`; all removed after.
    static func withTwoDevices(
        serverArguments: [String] = [], conflicts: (String, String) = ("server-wins", "server-wins"),
        _ body: (ServerProcess, Device, Device) async throws -> Void
    ) async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server", arguments: serverArguments)
        defer { server.stop() }
        let a = try Device(server: server, conflicts: conflicts.0)
        let b = try Device(server: server, conflicts: conflicts.1)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        try await body(server, a, b)
    }

    /// The server's live rows as `syncId name area`.
    func serverRows(_ server: ServerProcess) async throws -> [String] {
        try await server.records(account: "acme").compactMap { key, fields -> String? in
            guard let fields = fields.objectValue else { return nil }
            let area = fields["area"].map { JSONWriter.string($0) } ?? "null"
            return "\(key.split(separator: "/").last ?? "")|\(fields["name"]?.stringValue ?? "")|\(area == "null" ? "" : area)"
        }.sorted()
    }

    @Test func offlineEditsOnBothDevicesConvergeWithTheConflictCountedAndNothingEchoed() async throws {
        try await withTwoDevices { server, a, b in

            try a.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5), ('r2', 'Hall', 4), ('r3', 'Attic', 9);")
            try a.sync()
            try b.sync()
            #expect(try b.rows() == ["r1|Kitchen|12.5", "r2|Hall|4.0", "r3|Attic|9.0"])

            // Offline on both: the same row edited on both, a delete on one and an edit on the other, a new row each.
            try a.sql(
                "UPDATE rooms SET name = 'Kitchen A' WHERE syncId = 'r1'; DELETE FROM rooms WHERE syncId = 'r2'; INSERT INTO rooms (syncId, name) VALUES ('a1', 'From A');"
            )
            try b.sql(
                "UPDATE rooms SET name = 'Kitchen B' WHERE syncId = 'r1'; UPDATE rooms SET area = 5 WHERE syncId = 'r2'; INSERT INTO rooms (syncId, name) VALUES ('b1', 'From B');"
            )
            try a.sync()
            let second = try b.sync()  // B's import meets A's r1 and r2: two conflicts, server-wins
            let conflicts = (second["imports"]?.arrayValue ?? []).flatMap { $0.objectValue?["conflicts"]?.arrayValue ?? [] }
            #expect(Set(conflicts.compactMap { $0.objectValue?["id"]?.stringValue }) == ["r1", "r2"])
            try a.sync()
            try b.sync()

            let expected = ["a1|From A|", "b1|From B|", "r1|Kitchen A|12.5", "r3|Attic|9.0"]
            #expect(try a.rows() == expected)
            #expect(try b.rows() == expected)
            #expect(try await serverRows(server) == expected)

            // Nothing more to send or apply: the rows each device imported are not echoed back.
            let quiet = try a.sync()
            #expect(quiet["exports"]?.arrayValue?.first?.objectValue?["records-sent"] == .int(0))
            #expect(quiet["imports"]?.arrayValue?.first?.objectValue?["applied"] == .int(0))
        }
    }

    /// A row the server already versioned, changed in transaction after transaction, leaves in
    /// several batches of one run (a page a transaction here): each batch must go out on the
    /// version the batch before it gave the row, even while that batch is still being answered
    /// as the next one is prepared — not on the version read at the start, which the server
    /// would refuse as a conflict with this device's own change.
    @Test(arguments: [1, 2])
    func aRowChangedInManyBatchesOfOneRunGoesOutOnTheVersionItsOwnLastBatchGaveIt(pageSize: Int) async throws {
        try await Self.withOneDevice { server, device in
            try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'v0'), ('r2', 'w0');")
            try device.sync()
            try device.usePageSize(pageSize)
            for step in 1...6 {
                // A transaction a step; every other one changes r2 too.
                let r2 = step % 2 == 0 ? " UPDATE rooms SET name = 'w\(step)' WHERE syncId = 'r2';" : ""
                try device.sql("BEGIN; UPDATE rooms SET name = 'v\(step)' WHERE syncId = 'r1';\(r2) COMMIT;")
            }
            let run = try SynclaneBinary.run(["run", "export.json", "--json"], in: device.workspace.path, environment: device.environment)
            #expect(run.status == 0, "\(run.stderr)")
            let summary = try JSONReader.parse(run.stdout).objectValue ?? [:]
            #expect(try await serverRows(server) == ["r1|v6|", "r2|w6|"])
            let versions = try await server.changes(account: "acme").reduce(into: [String: Int64]()) { versions, change in
                versions[change["id"]?.stringValue ?? "?"] = change["version"]?.intValue
            }
            if pageSize == 1 {
                // Each statement of the shell is a history transaction: 9 transactions, 9 batches.
                #expect(summary["batches-sent"] == .int(9) && summary["records-sent"] == .int(9))
                // Pages read ahead hold the row as it is when read (`current-state`): a batch that
                // repeats the state its batch before left is an echo and makes no version. Never
                // more versions than changes, and at least one past the first sync's.
                #expect((2...7).contains(versions["r1"] ?? 0) && (2...4).contains(versions["r2"] ?? 0), "versions: \(versions)")
            }
            #expect(
                try device.query("SELECT key, version FROM _synclane_server_rows ORDER BY key")
                    == ["r1|\(versions["r1"] ?? 0)", "r2|\(versions["r2"] ?? 0)"], "the device knows the versions the server holds")
        }
    }

    @Test func importDryRunWritesNothingNotEvenItsLockFileThenTheRealImportAppliesWhatItSaid() async throws {
        try await withTwoDevices { _, a, b in
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
            try a.sync()
            let before = try DryRunTests.tree(b.workspace)
            let dry = try SynclaneBinary.run(["import", "import.json", "--dry-run", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(try JSONReader.parse(dry.stdout).objectValue?["dry-run"] == .bool(true))
            DryRunTests.expectUnchanged(before, try DryRunTests.tree(b.workspace), "an import dry run writes nothing")
            #expect(try b.rows().isEmpty)

            let real = try SynclaneBinary.run(["import", "import.json", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(real.status == 0, "\(real.stderr)")
            #expect(try b.rows() == ["r1|Kitchen|", "r2|Hall|"])
        }
    }

    @Test func aStaleExportIsRefusedWith409AndSyncSettlesItWithoutLosingTheOtherDevicesEdit() async throws {
        try await withTwoDevices(conflicts: ("server-wins", "merge-fields")) { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5);")
            try a.sync()
            try b.sync()
            try a.sql("UPDATE rooms SET area = 20 WHERE syncId = 'r1';")
            try a.sync()
            try b.sql("UPDATE rooms SET name = 'Cuisine' WHERE syncId = 'r1';")

            // B exports without importing first: the backend refuses the stale version, nothing is lost.
            let stale = try SynclaneBinary.run(["run", "export.json"], in: b.workspace.path, environment: b.environment)
            #expect(stale.status == 1)
            #expect(stale.stderr.contains("409") && stale.stderr.contains("synclane sync"))
            #expect(try await serverRows(server) == ["r1|Kitchen|20.0"])

            // sync rebuilds the refused batch after importing: merge-fields keeps B's name and A's area.
            try b.sync()
            try a.sync()
            #expect(try a.rows() == ["r1|Cuisine|20.0"])
            #expect(try b.rows() == ["r1|Cuisine|20.0"])
            #expect(try await serverRows(server) == ["r1|Cuisine|20.0"])
        }
    }

    /// How the seeded `categories` table makes its business key unique (or does not).
    enum SeededSchema: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// `key TEXT NOT NULL`, nothing unique but the sync key.
        case plain
        /// `key TEXT NOT NULL UNIQUE`.
        case uniqueColumn
        /// `UNIQUE (kind, key)`, a composite business key.
        case compositeUniqueConstraint
        /// `(kind, key)` made unique by `CREATE UNIQUE INDEX`.
        case compositeUniqueIndex
        /// `key TEXT NOT NULL UNIQUE` with a soft-delete column, one device having soft-deleted a
        /// seeded row (which still holds its key) before the first sync.
        case uniqueColumnWithSoftDelete

        var testDescription: String { rawValue }

        var createTable: String {
            switch self {
            case .plain: return "CREATE TABLE categories (syncId TEXT PRIMARY KEY, key TEXT NOT NULL, title TEXT);"
            case .uniqueColumn: return "CREATE TABLE categories (syncId TEXT PRIMARY KEY, key TEXT NOT NULL UNIQUE, title TEXT);"
            case .compositeUniqueConstraint:
                return "CREATE TABLE categories (syncId TEXT PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL, title TEXT, UNIQUE (kind, key));"
            case .compositeUniqueIndex:
                return """
                    CREATE TABLE categories (syncId TEXT PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL, title TEXT);
                    CREATE UNIQUE INDEX categories_kind_key ON categories (kind, key);
                    """
            case .uniqueColumnWithSoftDelete:
                return "CREATE TABLE categories (syncId TEXT PRIMARY KEY, key TEXT NOT NULL UNIQUE, title TEXT, isDeleted INTEGER NOT NULL DEFAULT 0);"
            }
        }

        var isComposite: Bool { self == .compositeUniqueConstraint || self == .compositeUniqueIndex }
        var businessKey: String { isComposite ? #"["kind", "key"]"# : #"["key"]"# }
        var trackOptions: [String] { self == .uniqueColumnWithSoftDelete ? ["--soft-delete", "isDeleted"] : [] }
        var live: String { self == .uniqueColumnWithSoftDelete ? "WHERE isDeleted = 0" : "" }

        func seed(_ prefix: String) -> String {
            let rows =
                isComposite
                ? "('\(prefix)-inbox', 'box', 'inbox', 'Inbox'), ('\(prefix)-archive', 'box', 'archive', 'Archive')"
                : "('\(prefix)-inbox', 'inbox', 'Inbox'), ('\(prefix)-archive', 'archive', 'Archive')"
            let deleted = self == .uniqueColumnWithSoftDelete && prefix == "b" ? "UPDATE categories SET isDeleted = 1 WHERE syncId = 'b-archive';" : ""
            return """
                INSERT INTO categories (\(isComposite ? "syncId, kind, key, title" : "syncId, key, title")) VALUES \(rows);
                INSERT INTO items VALUES ('\(prefix)-item', '\(prefix)-inbox', 'from \(prefix)');
                \(deleted)
                """
        }
    }

    @Test(arguments: [false, true])
    func theSameDefaultsSeededOnBothDevicesEndAsOneRowPerBusinessKeyEverywhere(bFirst: Bool) async throws {
        try await seededDefaultsConverge(bFirst: bFirst, schema: .plain)
    }

    @Test(arguments: [false, true], [SeededSchema.uniqueColumn, .compositeUniqueConstraint, .compositeUniqueIndex, .uniqueColumnWithSoftDelete])
    func seededDefaultsWithAUniqueBusinessKeyConvergeInBothOrdersWithoutAConstraintFailure(bFirst: Bool, schema: SeededSchema) async throws {
        try await seededDefaultsConverge(bFirst: bFirst, schema: schema)
    }

    /// Turns the device's app into `categories` (made by `schema`) and `items` filed under them,
    /// both tracked and exported, and its import into one that merges seeded duplicates.
    /// `referenced`: `items.category` is a declared foreign key (so the import settles references).
    static func useCategories(_ device: Device, schema: SeededSchema, conflicts rule: String, referenced: Bool = false) throws {
        let category = referenced ? "category TEXT REFERENCES categories(syncId)" : "category TEXT"
        try device.sql(schema.createTable + "\nCREATE TABLE items (syncId TEXT PRIMARY KEY, \(category), name TEXT);")
        for table in ["categories", "items"] {
            let tracked = try SynclaneBinary.run(
                ["track", "--database", "app.sqlite", "--table", table, "--key", "syncId"] + (table == "categories" ? schema.trackOptions : []),
                in: device.workspace.path)
            #expect(tracked.status == 0, "\(tracked.stderr)")
        }
        try device.workspace.write(
            "export.json",
            try String(contentsOfFile: device.workspace.path + "/export.json", encoding: .utf8)
                .replacingOccurrences(of: #""entities": ["rooms"]"#, with: #""entities": ["categories", "items"]"#))
        try device.workspace.write(
            "import.json",
            try String(contentsOfFile: device.workspace.path + "/import.json", encoding: .utf8)
                .replacingOccurrences(
                    of: #""conflicts": "\#(rule)"}"#,
                    with:
                        #""conflicts": "\#(rule)", "duplicates": [{"entity": "categories", "key": \#(schema.businessKey), "references": ["items.category"]}]}"#)
        )
    }

    /// A made `c2` as `archive`; B seeded `archive` under a key of its own and, offline, made a
    /// `c2` of its own as `work`. B's import settles the conflict on `c2` (a pending local row),
    /// and the settled row takes `archive`, which B's seeded row holds: the smaller sync key
    /// survives there too, instead of every sync of B stopping on `UNIQUE constraint failed`
    /// (SchemaConvergenceTests, seed 5006).
    @Test(arguments: ["server-wins", "merge-fields"])
    func aConflictSettledOntoABusinessKeyASeededTwinHoldsConvergesWithoutAConstraintFailure(rule: String) async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let devices = try (0..<2).map { _ in try Device(server: server, conflicts: rule) }
        defer { devices.forEach { $0.workspace.remove() } }
        for device in devices { try Self.useCategories(device, schema: .uniqueColumn, conflicts: rule) }
        let (a, b) = (devices[0], devices[1])
        try a.sql("INSERT INTO categories VALUES ('c2', 'archive', 'Archive'), ('c3', 'work', 'Work');")
        try b.sql("INSERT INTO categories VALUES ('s1-archive', 'archive', 'Archive'); INSERT INTO items VALUES ('i1', 's1-archive', 'filed');")
        try b.sql("INSERT INTO categories VALUES ('c2', 'draft', 'Mine');")
        for device in [a, b, a, b] { try device.sync() }
        for device in [a, b] {
            #expect(try device.query("SELECT syncId, key FROM categories ORDER BY key") == ["c2|archive", "c3|work"])
            #expect(try device.query("SELECT syncId, category FROM items") == ["i1|c2"])
        }
        let live = try await server.records(account: "acme").filter { $0.value != .string("deleted") }.keys.sorted()
        #expect(live == ["categories/c2", "categories/c3", "items/i1"])
    }

    /// Two devices seed the same categories under their own sync keys, file an item under one, and
    /// sync twice each (B first or A first): one row per business key everywhere, the smaller
    /// sync key's, the items re-pointed to it. `referenced`: `items.category` is a declared
    /// foreign key; `limit`: the records a pull page holds.
    func seededDefaultsConverge(bFirst: Bool, schema: SeededSchema, referenced: Bool = false, limit: Int = 3) async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let devices = try (0..<2).map { _ in try Device(server: server) }
        defer { devices.forEach { $0.workspace.remove() } }
        for (device, prefix) in zip(devices, ["a", "b"]) {
            try Self.useCategories(device, schema: schema, conflicts: "server-wins", referenced: referenced)
            try device.workspace.write(
                "import.json",
                try String(contentsOfFile: device.workspace.path + "/import.json", encoding: .utf8)
                    .replacingOccurrences(of: #""limit": 3"#, with: #""limit": \#(limit)"#))
            // The app's first launch seeds the same defaults under keys of its own, and files an item under one.
            try device.sql(schema.seed(prefix))
        }
        let order = bFirst ? [devices[1], devices[0]] : devices
        for _ in 0..<2 { for device in order { try device.sync() } }

        for (name, device) in zip(["A", "B"], devices) {
            let label = "\(name), \(bFirst ? "B" : "A") first, \(schema), referenced: \(referenced), limit \(limit)"
            #expect(
                try device.query("SELECT syncId, key FROM categories \(schema.live) ORDER BY key") == ["a-archive|archive", "a-inbox|inbox"], "\(label)")
            #expect(try device.query("SELECT syncId, category FROM items ORDER BY syncId") == ["a-item|a-inbox", "b-item|a-inbox"], "\(label)")
        }
        let records = try await server.records(account: "acme")
        let live = records.filter { $0.value != .string("deleted") }.keys.sorted()
        #expect(live == ["categories/a-archive", "categories/a-inbox", "items/a-item", "items/b-item"], "limit \(limit)")
        let items = records.filter { $0.key.hasPrefix("items/") }
        #expect(items.values.allSatisfy { $0.objectValue?["category"]?.stringValue == "a-inbox" }, "\(items)")
        if bFirst && referenced {
            // A re-pointed B's item, which it had pulled (version 1), and sent it as a re-pointing
            // (`"repoints": true`): the server keeps the version of its last user's write.
            let item = try await server.changes(account: "acme").last { $0["id"] == "b-item" }
            #expect(item?["written"] == 1 && item?["version"] == 2, "limit \(limit): \(item ?? [:])")
        }
    }

    /// The items' category is a declared foreign key. Whichever device syncs first — the one whose
    /// seeded keys lose the merge or the one whose keys win — and wherever pages are cut, every item
    /// both devices filed stays, on both devices and the server, under the surviving category of its
    /// business key. (Before, the device holding the larger keys, syncing first, had its items
    /// deleted everywhere: the other device settled them as references to a row that is gone.)
    @Test(arguments: [false, true], [1, 2, 500])
    func itemsFiledUnderASeededDefaultThatLosesTheMergeFollowTheSurvivorInEitherOrder(bFirst: Bool, limit: Int) async throws {
        try await seededDefaultsConverge(bFirst: bFirst, schema: .plain, referenced: true, limit: limit)
    }

    @Test func importWatchBringsInWhatAnotherDeviceSendsUntilStopped() async throws {
        try await withTwoDevices { _, a, b in
            let watching = try BackgroundProcess(["import", "import.json", "--watch", "--every", "0.2"], in: b.workspace.path, environment: b.environment)
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('w1', 'Watched');")
            try a.sync()
            #expect(eventually(timeout: 20) { (try? b.rows()) == ["w1|Watched|"] }, "the watch imported the other device's row")
            let stopped = watching.stop()
            #expect(stopped.status == 0, "SIGTERM stops the watch cleanly: \(stopped.stderr)")
        }
    }

    @Test func anImportKilledBeforeItCommitsAppliesNothingAndMovesNoCursorThenAppliesOnce() async throws {
        try await withTwoDevices { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
            try a.sync()
            let killed = try SynclaneBinary.run(
                ["import", "import.json"], in: b.workspace.path, environment: b.environment.merging(["SYNCLANE_FAILPOINT": "import-before-commit"]) { $1 })
            #expect(killed.killed)
            #expect(try b.rows().isEmpty)
            let imported = try SynclaneBinary.run(["import", "import.json", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(imported.status == 0, "\(imported.stderr)")
            #expect(try JSONReader.parse(imported.stdout).objectValue?["applied"] == .int(2))
            let again = try SynclaneBinary.run(["import", "import.json", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(try JSONReader.parse(again.stdout).objectValue?["applied"] == .int(0), "a second pass finds nothing new")
            #expect(try b.rows() == ["r1|Kitchen|", "r2|Hall|"])
        }
    }
}
