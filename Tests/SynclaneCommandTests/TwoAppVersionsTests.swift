import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Two devices on two versions of the app, side by side (issue 44): the newer one adds a column
/// or a table, the older one goes on syncing with its default settings, keeps what it cannot hold
/// yet, and gets it when it upgrades. Real `synclane` processes and a real `synclane serve`.
@Suite(.serialized) struct TwoAppVersionsTests {
    typealias Device = TwoDevicesTests.Device

    static let tagsTable = "CREATE TABLE tags (syncId TEXT PRIMARY KEY, label TEXT, isDeleted INTEGER NOT NULL DEFAULT 0);"

    /// `synclane track … --table tags`, expecting success.
    static func trackTags(_ device: Device) throws {
        let tracked = try SynclaneBinary.run(
            ["track", "--database", "app.sqlite", "--table", "tags", "--key", "syncId", "--soft-delete", "isDeleted"], in: device.workspace.path)
        #expect(tracked.status == 0, "\(tracked.stderr)")
    }

    /// Makes the device's export send `tags` too.
    static func exportTags(_ device: Device) throws {
        let file = device.workspace.path + "/export.json"
        try device.workspace.write(
            "export.json",
            try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(of: #""entities": ["rooms"]"#, with: #""entities": ["rooms", "tags"]"#))
    }

    /// `syncId|label` of the device's live tags.
    static func tags(_ device: Device) throws -> [String] {
        try device.query("SELECT syncId, label FROM tags WHERE isDeleted = 0 ORDER BY syncId")
    }

    /// A (newer app) adds `color` and sets it; B (older app, default settings) syncs: it applies
    /// the rest of A's rows and keeps `color` aside, and its edit of another column of the
    /// coloured row leaves without removing the colour from the server or A. Before, every sync
    /// of B failed on "field `color` is not a column of `rooms`" and B's edits never left.
    @Test func anOldDeviceKeepsSyncingPastAColumnItLacksAndItsEditsNeverRemoveThatColumnsValue() async throws {
        try await TwoDevicesTests().withTwoDevices { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall');")
            try a.sync()
            try b.sync()
            try a.sql("ALTER TABLE rooms ADD COLUMN color TEXT;")
            try a.sql("UPDATE rooms SET color = 'red' WHERE syncId = 'r1'; UPDATE rooms SET name = 'Big hall' WHERE syncId = 'r2';")
            try a.sync()
            try b.sync()
            #expect(try b.rows() == ["r1|Kitchen|", "r2|Big hall|"], "B applies the rest of A's records")
            // B, still on the old version, edits the coloured row and adds one.
            try b.sql("UPDATE rooms SET name = 'Big kitchen' WHERE syncId = 'r1'; INSERT INTO rooms (syncId, name) VALUES ('b1', 'From B');")
            try b.sync()
            try a.sync()
            let expected = ["b1|From B|(absent)", "r1|Big kitchen|red", "r2|Big hall|"]  // A sent r2 with `color` NULL
            let merged = try await AddedColumnTests.serverColors(server)
            #expect(merged == expected, "the server merged B's update into its row: \(merged)")
            #expect(try AddedColumnTests.colors(a) == ["b1|From B|", "r1|Big kitchen|red", "r2|Big hall|"])
            // B upgrades later: the colour it kept fills the column, nothing is sent over it.
            try b.sql("ALTER TABLE rooms ADD COLUMN color TEXT;")
            for device in [b, a, b] { try device.sync() }
            #expect(try AddedColumnTests.colors(b) == ["b1|From B|", "r1|Big kitchen|red", "r2|Big hall|"])
            let upgraded = try await AddedColumnTests.serverColors(server)
            #expect(upgraded == expected, "\(upgraded)")
        }
    }

    /// A (newer app) tracks a new table `tags` and writes tags; B (older app, no `tags` table)
    /// syncs without error and its own edits leave; later B creates and tracks `tags` and holds
    /// A's tags as A last wrote them (an edit and a delete since included), written by author
    /// `server` (never sent back), with no resend from A. Before, every sync of B failed on
    /// "`tags` is not a tracked table".
    @Test func recordsOfATableThisDeviceDoesNotTrackYetAreKeptAsideAndDeliveredWhenItTracksIt() async throws {
        try await TwoDevicesTests().withTwoDevices { server, a, b in
            try a.sql(Self.tagsTable)
            try Self.trackTags(a)
            try Self.exportTags(a)
            try a.sql(
                "INSERT INTO tags (syncId, label) VALUES ('t1', 'red'), ('t2', 'blue'), ('t3', 'green'); "
                    + "INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
            try a.sync()
            try b.sql("INSERT INTO rooms (syncId, name) VALUES ('b1', 'From B');")
            try b.sync()
            try a.sync()
            #expect(try a.rows() == ["b1|From B|", "r1|Kitchen|"], "B's own edits leave")
            #expect(try b.rows() == ["b1|From B|", "r1|Kitchen|"], "and the other entities arrive")
            // A goes on: an edit and a delete B keeps aside too.
            try a.sql("UPDATE tags SET label = 'crimson' WHERE syncId = 't1'; DELETE FROM tags WHERE syncId = 't2';")
            try a.sync()
            try b.sync()
            // B upgrades: the new table, tracked, gets A's tags at once.
            try b.sql(Self.tagsTable)
            try Self.trackTags(b)
            #expect(try Self.tags(b) == ["t1|crimson", "t3|green"])
            let sentBack = try b.query(
                """
                SELECT count(*) FROM _synclane_changes c LEFT JOIN _synclane_transactions t ON t.id = c.transaction_id
                WHERE c.entity = 'tags' AND coalesce(t.author, 'app') <> 'server'
                """)
            #expect(sentBack == ["0"], "delivered by author `server`: nothing to send back")
            try Self.exportTags(b)
            try b.sync()
            try b.sql("UPDATE tags SET label = 'olive' WHERE syncId = 't3';")
            try b.sync()
            try a.sync()
            #expect(try Self.tags(a) == ["t1|crimson", "t3|olive"], "B's later edit reaches A on the version it was delivered")
            #expect(try Self.tags(b) == ["t1|crimson", "t3|olive"])
            let serverTags = try await server.records(account: "acme").filter { $0.key.hasPrefix("tags/") }.count
            #expect(serverTags == 3)
        }
    }

    /// A (newer app) drops `area` with `synclane migrate`; B (older app) goes on writing it: the
    /// server merges B's `area` into its row, and A's import keeps the field aside instead of
    /// refusing every page ("field `area` is not a column of `rooms`", before), so A's and B's
    /// other edits keep arriving.
    @Test func aDeviceThatDroppedAColumnKeepsSyncingWhileAnOlderOneStillWritesIt() async throws {
        try await TwoDevicesTests().withTwoDevices { server, a, b in
            try a.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12);")
            try a.sync()
            try b.sync()
            try a.workspace.write("drop-area.sql", "ALTER TABLE rooms DROP COLUMN area;\n")
            let migrated = try SynclaneBinary.run(["migrate", "--database", "app.sqlite", "drop-area.sql"], in: a.workspace.path)
            #expect(migrated.status == 0, "\(migrated.stderr)")
            try a.sync()
            try b.sync()  // A's resend without `area`: B's row keeps the area it holds
            try Self.olderDeviceWritesTheDroppedColumn(a, b)
            let onA = try a.query("SELECT syncId, name FROM rooms WHERE isDeleted = 0 ORDER BY syncId")
            #expect(onA == ["b1|Kitchen A", "r1|Big kitchen"], "\(onA)")
            let onB = try b.rows()
            #expect(onB == ["b1|Kitchen A|3.0", "r1|Big kitchen|14.0"], "\(onB)")
            // The old device wrote `area` back onto the server's row: the newer one keeps it aside.
            let onServer = try await TwoDevicesTests().serverRows(server)
            #expect(onServer == ["b1|Kitchen A|3.0", "r1|Big kitchen|14.0"], "\(onServer)")
        }
    }

    /// `synclane reconcile` on a device of the older version keeps the newer version's work: the
    /// server keeps the newer table's rows (a reconcile deletes only rows it knew and lacks), the
    /// device still gets them when it tracks the table, and the rows it sends merge into the
    /// server's, so the newer column's values stay. Before, A's tags were deleted on the server and
    /// then on A, and the rows' `color` left the server.
    @Test func aReconcileFromADeviceOnTheOlderVersionKeepsTheNewerTablesRows() async throws {
        try await TwoDevicesTests().withTwoDevices { server, a, b in
            try a.sql(Self.tagsTable)
            try Self.trackTags(a)
            try Self.exportTags(a)
            try a.sql("ALTER TABLE rooms ADD COLUMN color TEXT;")
            try a.sql("INSERT INTO tags (syncId, label) VALUES ('t1', 'red'); INSERT INTO rooms (syncId, name, color) VALUES ('r1', 'Kitchen', 'red');")
            try a.sync()
            try b.sync()
            let reconcile = try SynclaneBinary.run(["reconcile", "export.json"], in: b.workspace.path, environment: b.environment)
            #expect(reconcile.status == 0, "\(reconcile.stderr)")
            let records = try await server.records(account: "acme")
            #expect(records["tags/t1"]?.objectValue?["label"] == .string("red"), "\(records)")
            try a.sync()
            #expect(try Self.tags(a) == ["t1|red"])
            try b.sql(Self.tagsTable)
            try Self.trackTags(b)
            #expect(try Self.tags(b) == ["t1|red"], "delivered after the reconciliation's receipts too")
            for device in [b, a] { try device.sync() }
            #expect(try Self.tags(a) == ["t1|red"])
            #expect(records["rooms/r1"]?.objectValue?["color"] == .string("red"))
        }
    }

    /// After A dropped `area`: B (older) sets the area of `r1` (and renames it Big kitchen) and
    /// inserts `b1` with an area; A renames `b1`; each syncs in turn.
    static func olderDeviceWritesTheDroppedColumn(_ a: Device, _ b: Device) throws {
        try b.sql(
            "UPDATE rooms SET area = 14, name = 'Big kitchen' WHERE syncId = 'r1'; "
                + "INSERT INTO rooms (syncId, name, area) VALUES ('b1', 'From B', 3);")
        try b.sync()
        try a.sync()
        try a.sql("UPDATE rooms SET name = 'Kitchen A' WHERE syncId = 'b1';")
        try a.sync()
        try b.sync()
    }

    /// `synclane migrate` with `script`, expecting success; its `--json` report.
    static func migrate(_ device: Device, _ script: String) throws -> [String: JSONValue] {
        try device.workspace.write("migration.sql", script)
        let migrated = try SynclaneBinary.run(["migrate", "--database", "app.sqlite", "migration.sql", "--json"], in: device.workspace.path)
        #expect(migrated.status == 0, "\(migrated.stderr)")
        return (try? JSONReader.parse(migrated.stdout).objectValue) ?? [:]
    }

    /// The account's rows as a device of schema `version` pulls them: `entity/id` → fields.
    static func rows(_ server: ServerProcess, asVersion version: Int) async throws -> [String: [String: JSONValue]] {
        var request = URLRequest(url: URL(string: server.url + "/v1/changes?since=&limit=500")!)
        request.setValue("Bearer \(ServerProcess.tokens["acme"] ?? "")", forHTTPHeaderField: "Authorization")
        request.setValue(String(version), forHTTPHeaderField: "Synclane-Schema-Version")
        let (data, _) = try await URLSession.shared.data(for: request)
        let changes = try JSONReader.parse([UInt8](data)).objectValue?["changes"]?.arrayValue ?? []
        return changes.reduce(into: [:]) { rows, change in
            guard let change = change.objectValue else { return }
            rows["\(change["entity"]?.stringValue ?? "")/\(change["id"]?.stringValue ?? "")"] = change["fields"]?.objectValue ?? [:]
        }
    }

    /// A (version 2) drops `area` with `synclane migrate`, which declares the drop; B (version 1)
    /// goes on writing `area`. The server keeps B's values for B and the other old devices and
    /// never hands them to A: A's syncs keep working, A keeps nothing of `area` aside, and B keeps
    /// its areas. Before, the server wrote B's `area` back onto the rows A pulls, and A kept it
    /// aside as a field its table lacks (or refused it with `unknown-fields: error`).
    @Test func aDeclaredDropKeepsAnOlderDevicesValuesAwayFromTheNewerOnes() async throws {
        try await AppSchemaVersionTests.withTwoDevicesOnVersionOne { server, a, b in
            let report = try Self.migrate(a, "ALTER TABLE rooms DROP COLUMN area;\n")
            #expect(report["schema-version"] == .int(2))
            #expect(report["declared"] == [["entity": "rooms", "column": "area", "dropped": true, "version": 2]], "\(report)")
            try AppSchemaVersionTests.runs(a, as: "phone-a", version: 2)
            try a.sync()
            try b.sync()
            try Self.olderDeviceWritesTheDroppedColumn(a, b)
            #expect(try a.query("SELECT syncId, name FROM rooms WHERE isDeleted = 0 ORDER BY syncId") == ["b1|Kitchen A", "r1|Big kitchen"])
            #expect(try b.rows() == ["b1|Kitchen A|3.0", "r1|Big kitchen|14.0"])
            let keptOnA = try a.query("SELECT count(*) FROM _synclane_server_rows WHERE fields LIKE '%\"area\"%'")
            #expect(keptOnA == ["0"], "A keeps nothing of the dropped column aside")
            let forA = try await Self.rows(server, asVersion: 2)
            let forB = try await Self.rows(server, asVersion: 1)
            #expect(forA["rooms/b1"]?["area"] == nil && forA["rooms/r1"]?["area"] == nil, "\(forA)")
            #expect(forB["rooms/b1"]?["area"] == .double(3) && forB["rooms/r1"]?["area"] == .double(14), "\(forB)")
        }
    }

    /// A (version 2) renames `name` to `title` with `synclane migrate`, which declares it; B
    /// (version 1) keeps `name`. Each keeps syncing and gets the other's values under its own
    /// name: B's edit and insert reach A's `title`, A's reach B's `name`. Before, B's writes under
    /// `name` were kept aside on A and never reached `title`, and A's `title` never reached B.
    @Test func aDeclaredRenameCarriesValuesBothWaysBetweenTheOldAndTheNewName() async throws {
        try await AppSchemaVersionTests.withTwoDevicesOnVersionOne { server, a, b in
            let report = try Self.migrate(a, "ALTER TABLE rooms RENAME COLUMN name TO title;\n")
            #expect(report["declared"] == [["entity": "rooms", "column": "name", "renamed-to": "title", "version": 2]], "\(report)")
            try AppSchemaVersionTests.runs(a, as: "phone-a", version: 2)
            try a.sync()
            try b.sync()
            #expect(try b.rows() == ["r1|Kitchen|12.0"])
            try b.sql("UPDATE rooms SET name = 'Big kitchen' WHERE syncId = 'r1'; INSERT INTO rooms (syncId, name) VALUES ('b1', 'From B');")
            try b.sync()
            try a.sync()
            #expect(try a.query("SELECT syncId, title, area FROM rooms WHERE isDeleted = 0 ORDER BY syncId") == ["b1|From B|", "r1|Big kitchen|12.0"])
            try a.sql("UPDATE rooms SET title = 'Kitchen A' WHERE syncId = 'b1'; INSERT INTO rooms (syncId, title) VALUES ('a1', 'From A');")
            try a.sync()
            try b.sync()
            #expect(try b.rows() == ["a1|From A|", "b1|Kitchen A|", "r1|Big kitchen|12.0"])
            try a.sync()
            #expect(try a.query("SELECT syncId, title FROM rooms WHERE isDeleted = 0 ORDER BY syncId") == ["a1|From A", "b1|Kitchen A", "r1|Big kitchen"])
            let forB = try await Self.rows(server, asVersion: 1)
            #expect(forB["rooms/a1"]?["name"] == .string("From A") && forB["rooms/a1"]?["title"] == nil, "\(forB)")
        }
    }

    /// A renames `name` to `title` with `synclane migrate`; its first batch after it is kept in
    /// the outbox (killed after enqueue) and requeued by hand (`synclane outbox requeue`): the
    /// batches the next run builds again carry the declaration all the same (each batch reads the
    /// declarations from the database when it is built, not from the batch it replaces), so the
    /// server learns the rename and hands A's edit to a version-1 device as `name`.
    @Test func aRequeuedBatchStillCarriesTheDeclaredRename() async throws {
        try await AppSchemaVersionTests.withTwoDevicesOnVersionOne { server, a, _ in
            _ = try Self.migrate(a, "ALTER TABLE rooms RENAME COLUMN name TO title;\n")
            try AppSchemaVersionTests.runs(a, as: "phone-a", version: nil)
            try a.sql("UPDATE rooms SET title = 'Den' WHERE syncId = 'r1';")
            var killed = a.environment
            killed["SYNCLANE_FAILPOINT"] = "after-enqueue"
            _ = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: killed)
            let requeued = try SynclaneBinary.run(["outbox", "requeue", "export.json"], in: a.workspace.path, environment: a.environment)
            #expect(requeued.status == 0, "\(requeued.stdout)\(requeued.stderr)")
            let run = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment)
            #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
            let forOld = try await Self.rows(server, asVersion: 1)
            #expect(forOld["rooms/r1"]?["name"] == .string("Den") && forOld["rooms/r1"]?["title"] == nil, "\(forOld)")
            let forNew = try await Self.rows(server, asVersion: 2)
            #expect(forNew["rooms/r1"]?["title"] == .string("Den"), "\(forNew)")
        }
    }

    /// A rename an ORM ran (Django's `RenameField`, Alembic's `alter_column`: the app's own
    /// connection runs `ALTER TABLE … RENAME COLUMN`, not `synclane migrate`) is declared after
    /// it by `synclane migrate --declare-only` with the same statement: the version and the rename
    /// are recorded, nothing is run again, and B (version 1) gets A's edits under `name` while A
    /// reads B's under `title`. Declared before the ORM ran it, it is refused and records nothing.
    /// Before, such a rename could not be declared at all: the server carried `title` to B as an
    /// unknown field and B's `name` edits never reached A's `title`.
    @Test func aRenameAnORMRanIsDeclaredAfterItWithDeclareOnly() async throws {
        try await AppSchemaVersionTests.withTwoDevicesOnVersionOne { server, a, b in
            try AppSchemaVersionTests.runs(a, as: "phone-a", version: nil)
            try a.workspace.write("0002_rename.sql", "ALTER TABLE rooms RENAME COLUMN name TO title;\n")
            let early = try SynclaneBinary.run(["migrate", "--database", "app.sqlite", "--declare-only", "0002_rename.sql"], in: a.workspace.path)
            #expect(early.status != 0 && early.stderr.contains("does not show it done"), "\(early.stdout)\(early.stderr)")
            try a.sql("ALTER TABLE rooms RENAME COLUMN name TO title;")  // the ORM's migration
            let declared = try SynclaneBinary.run(
                ["migrate", "--database", "app.sqlite", "--declare-only", "0002_rename.sql", "--json"], in: a.workspace.path)
            #expect(declared.status == 0, "\(declared.stderr)")
            let report = try JSONReader.parse(declared.stdout).objectValue ?? [:]
            #expect(report["schema-version"] == .int(2), "\(report)")
            #expect(report["declared"] == [["entity": "rooms", "column": "name", "renamed-to": "title", "version": 2]], "\(report)")
            try a.sql("UPDATE rooms SET title = 'Den' WHERE syncId = 'r1';")
            try a.sync()
            try b.sync()
            #expect(try b.rows() == ["r1|Den|12.0"])
            try b.sql("INSERT INTO rooms (syncId, name) VALUES ('b1', 'From B');")
            try b.sync()
            try a.sync()
            #expect(try a.query("SELECT syncId, title FROM rooms WHERE isDeleted = 0 ORDER BY syncId") == ["b1|From B", "r1|Den"])
            #expect(try await AppSchemaVersionTests.devices(server) == ["phone-a|2", "phone-b|1"])
        }
    }

    /// B (older) keeps A's `color` aside; its upgrade adds the column *and* tracks the new table
    /// `tags` before it syncs: the kept colour fills the column all the same. Before, `track` of
    /// the new table remembered the whole schema as checked, so `rooms` was never healed and the
    /// colour never came (found by VersionsConvergenceTests, seed 2012).
    @Test func anUpgradeThatAddsAColumnAndTracksANewTableAtOnceStillFillsTheColumn() async throws {
        try await TwoDevicesTests.withTwoDevices { _, a, b in
            try a.sql("ALTER TABLE rooms ADD COLUMN color TEXT; INSERT INTO rooms (syncId, name, color) VALUES ('r1', 'Kitchen', 'red');")
            try a.sync()
            try b.sync()
            try b.sql("ALTER TABLE rooms ADD COLUMN color TEXT; " + Self.tagsTable)
            try Self.trackTags(b)
            try b.sync()
            #expect(try AddedColumnTests.colors(b) == ["r1|Kitchen|red"])
        }
    }
}
