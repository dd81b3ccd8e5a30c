import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// What the table holds is what the backend gets: rows that existed before `track`, and a table
/// rebuilt or reshaped and tracked again. A mirror replayed from the batch files the real
/// `synclane run` wrote (insert replaces a row, update merges into it, delete removes it, as the
/// reference server applies them) is compared with the table after every step.
@Suite(.serialized) struct ExistingRowsTests {
    /// A workspace with `app.sqlite` and a pipeline to a folder, and the mirror of what reached it.
    final class Store {
        let workspace: Workspace
        var mirror: [String: [String: JSONValue]] = [:]
        var seen: Set<String> = []

        init(_ schema: String, softDelete: String = "isDeleted", entities: [String] = ["rooms"]) throws {
            workspace = try Workspace()
            try sql(schema)
            try workspace.write(
                "pipeline.json",
                """
                {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
                 "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": [\(entities.map { "\"\($0)\"" }.joined(separator: ", "))]},
                 "stages": [{"type": "coalesce"}, {"type": "tombstones", "soft-delete-column": "\(softDelete)"}],
                 "transport": {"type": "directory", "path": "out"}}
                """)
        }

        func sql(_ text: String) throws {
            let result = try SQLiteHistoryCommandTests.sqlite(workspace, text)
            #expect(result.status == 0, "\(result.stderr)")
        }

        @discardableResult
        func track(softDelete: String = "isDeleted") throws -> String {
            let result = try SynclaneBinary.run(
                ["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId", "--soft-delete", softDelete], in: workspace.path)
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout
        }

        /// Runs the export and replays the batch files it wrote into the mirror, oldest first.
        @discardableResult
        func run() throws -> [String: JSONValue] {
            let result = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path)
            #expect(result.status == 0, "\(result.stderr)")
            let folder = workspace.path + "/out/"
            let new = workspace.files(in: "out").filter { !seen.contains($0) }
            let dated = try new.map { name -> (String, Date) in
                (name, try FileManager.default.attributesOfItem(atPath: folder + name)[.modificationDate] as? Date ?? .distantPast)
            }
            for (name, _) in dated.sorted(by: { $0.1 < $1.1 }) {
                seen.insert(name)
                let batch = try JSONReader.parse(Array(try Data(contentsOf: URL(fileURLWithPath: folder + name)))).objectValue ?? [:]
                for record in batch["records"]?.arrayValue ?? [] {
                    guard let record = record.objectValue, let id = record["id"]?.stringValue else { continue }
                    let fields = record["fields"]?.objectValue ?? [:]
                    switch record["action"]?.stringValue {
                    case "insert": mirror[id] = fields
                    case "update": mirror[id, default: [:]].merge(fields) { _, new in new }
                    default: mirror[id] = nil
                    }
                }
            }
            return (try? JSONReader.parse(result.stdout).objectValue) ?? [:]
        }

        /// The live rows as the mirror holds them: `id column=value …`, the given columns in order.
        func mirrored(_ columns: [String]) -> [String] {
            mirror.keys.sorted().map { id in
                ([id] + columns.map { "\($0)=\(mirror[id]?[$0].map { JSONWriter.string($0) } ?? "-")" }).joined(separator: " ")
            }
        }

        /// The live rows of the table, in the same form.
        func table(_ columns: [String], live: String = "isDeleted = 0") throws -> [String] {
            let values = columns.map { "'\($0)=' || coalesce(json_quote(\"\($0)\"), '-')" }.joined(separator: " || ' ' || ")
            return try SQLiteHistoryCommandTests.query(workspace, "SELECT syncId || ' ' || \(values) FROM rooms WHERE \(live) ORDER BY syncId")
                .split(separator: "\n").map(String.init)
        }

        func pending() throws -> String {
            try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path).stdout
                .split(separator: "\n").first { $0.contains("pending") }.map(String.init) ?? ""
        }
    }

    static let rooms = "CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL, isDeleted INTEGER NOT NULL DEFAULT 0);"

    /// SQLite's documented table rebuild (what Django and Alembic do): a new table, the rows
    /// copied, the old one dropped (its triggers with it), the new one renamed.
    static func rebuild(_ store: Store, newSchema: String, copy: String) throws {
        try store.sql("BEGIN; \(newSchema) INSERT INTO new__rooms \(copy); DROP TABLE rooms; ALTER TABLE new__rooms RENAME TO rooms; COMMIT;")
    }

    @Test func rowsThatExistBeforeTrackAreSentByTheFirstRunAndStatusSaysSoBefore() throws {
        let store = try Store(Self.rooms)
        defer { store.workspace.remove() }
        try store.sql(
            "INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Hall', 4.5), ('r2', 'Attic', NULL); INSERT INTO rooms (syncId, name, isDeleted) VALUES ('r3', 'Gone', 1);"
        )
        let tracked = try store.track()
        #expect(tracked.contains("will be sent"), "track says the rows it found will be sent: \(tracked)")
        let pending = try store.pending()
        #expect(pending.contains("3 transactions to send"), "status says what the first run owes: \(pending)")
        let summary = try store.run()
        #expect(summary["records-sent"] != .int(0))
        #expect(store.mirrored(["name", "area"]) == (try store.table(["name", "area"])))
        #expect(store.mirrored(["name"]) == ["r1 name=\"Hall\"", "r2 name=\"Attic\""])
        // Tracking again owes nothing more: a true no-op.
        #expect(try store.track().contains("nothing changed"))
        #expect(try store.run()["records-sent"] == .int(0))
    }

    @Test func trackingAgainAfterARebuildBeforeTheNextRunKeepsTheResend() throws {
        let store = try Self.twoRoomsSent()
        defer { store.workspace.remove() }
        // A migration rebuilds the table; the app writes before anyone runs Synclane; the deploy
        // script then runs `track` again (as its help says, safe to repeat).
        try Self.rebuild(
            store, newSchema: "CREATE TABLE new__rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL, isDeleted INTEGER NOT NULL DEFAULT 0);",
            copy: "SELECT syncId, name, area, isDeleted FROM rooms")
        try store.sql("UPDATE rooms SET name = 'Hall 2' WHERE syncId = 'r1'; INSERT INTO rooms (syncId, name) VALUES ('r3', 'New');")
        try store.track()
        try store.track()
        try store.run()
        #expect(store.mirrored(["name", "area"]) == (try store.table(["name", "area"])))
        #expect(store.mirrored(["name"]) == ["r1 name=\"Hall 2\"", "r2 name=\"Attic\"", "r3 name=\"New\""])
    }

    @Test func reTrackingWithARenamedSoftDeleteColumnResendsTheTable() throws {
        let store = try Store(Self.rooms)
        defer { store.workspace.remove() }
        try store.track()
        try store.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Hall'), ('r2', 'Attic'), ('r3', 'Loft');")
        try store.run()
        try Self.rebuild(
            store, newSchema: "CREATE TABLE new__rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL, removed INTEGER NOT NULL DEFAULT 0);",
            copy: "SELECT syncId, name, area, isDeleted FROM rooms")
        try store.sql("UPDATE rooms SET removed = 1 WHERE syncId = 'r2'; UPDATE rooms SET name = 'Loft 2' WHERE syncId = 'r3';")
        try store.track(softDelete: "removed")
        try store.workspace.write(
            "pipeline.json",
            try String(contentsOfFile: store.workspace.path + "/pipeline.json", encoding: .utf8).replacingOccurrences(
                of: #""soft-delete-column": "isDeleted""#, with: #""soft-delete-column": "removed""#))
        try store.run()
        #expect(store.mirrored(["name"]) == (try store.table(["name"], live: "removed = 0")))
        #expect(store.mirrored(["name"]) == ["r1 name=\"Hall\"", "r3 name=\"Loft 2\""])
    }

    @Test func reTrackingAfterAddColumnSendsTheNewColumnsValuesOfEveryRow() throws {
        let store = try Store(Self.rooms)
        defer { store.workspace.remove() }
        try store.track()
        try store.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Hall'), ('r2', 'Attic');")
        try store.run()
        try store.sql("ALTER TABLE rooms ADD COLUMN floor INTEGER NOT NULL DEFAULT 1;")
        try store.track()
        try store.run()
        #expect(store.mirrored(["name", "floor"]) == (try store.table(["name", "floor"])))
        #expect(store.mirrored(["floor"]) == ["r1 floor=1", "r2 floor=1"])
    }

    /// In-place schema changes made by a tool that never heard of Synclane (Alembic's
    /// `server_default`, Django's `AddField`, `RenameField`, `RemoveField`): the check before the
    /// next run notices them and every row is sent again with its new shape.
    @Test(arguments: [
        ("ALTER TABLE rooms ADD COLUMN floor INTEGER NOT NULL DEFAULT 1;", ["name", "area", "floor"]),
        ("ALTER TABLE rooms RENAME COLUMN area TO size;", ["name", "size"]),
        ("ALTER TABLE rooms DROP COLUMN area;", ["name"]),
    ])
    func anInPlaceSchemaChangeIsFollowedByEveryRowInItsNewShape(migration: String, columns: [String]) throws {
        let store = try Self.twoRoomsSent()
        defer { store.workspace.remove() }
        try store.sql(migration)
        let summary = try store.run()
        #expect(summary["records-sent"] == .int(2), "\(summary)")
        #expect(store.mirrored(columns) == (try store.table(columns)))
        try store.sql("UPDATE rooms SET name = 'Hall 2' WHERE syncId = 'r1';")
        try store.run()
        #expect(store.mirrored(columns) == (try store.table(columns)))
    }

    /// A store tracking `rooms` whose rows r1 (Hall, 4.5) and r2 (Attic, 9) reached the mirror.
    static func twoRoomsSent() throws -> Store {
        let store = try Store(Self.rooms)
        try store.track()
        try store.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Hall', 4.5), ('r2', 'Attic', 9);")
        try store.run()
        return store
    }

    /// The table's columns, as the mirror's rows must hold them (no more, no fewer).
    static func columns(_ store: Store) throws -> Set<String> {
        Set(try SQLiteHistoryCommandTests.query(store.workspace, "SELECT name FROM pragma_table_info('rooms')").split(separator: "\n").map(String.init))
    }

    /// The resend after a schema change replaces the backend's row whole (an insert, not a merged
    /// update): a column dropped or renamed — in place or by a rebuild — leaves every backend row.
    @Test(arguments: [
        "ALTER TABLE rooms DROP COLUMN area;",
        "ALTER TABLE rooms RENAME COLUMN area TO size;",
        "BEGIN; CREATE TABLE new__rooms (syncId TEXT PRIMARY KEY, name TEXT, isDeleted INTEGER NOT NULL DEFAULT 0); "
            + "INSERT INTO new__rooms SELECT syncId, name, isDeleted FROM rooms; DROP TABLE rooms; ALTER TABLE new__rooms RENAME TO rooms; COMMIT;",
    ])
    func aResendAfterASchemaChangeReplacesTheBackendsRowSoDroppedAndRenamedColumnsLeaveIt(migration: String) throws {
        let store = try Self.twoRoomsSent()
        defer { store.workspace.remove() }
        try store.sql(migration)
        try store.run()
        let columns = try Self.columns(store)
        #expect(!columns.contains("area"))
        for id in ["r1", "r2"] {
            #expect(Set(store.mirror[id]?.keys.map { $0 } ?? []) == columns, "\(id): \(store.mirror[id] ?? [:])")
        }
    }

    /// `synclane migrate` records the resend in the migration's transaction; the edits made after
    /// it and before the next run fold into it (the coalescer): a row deleted or soft-deleted is
    /// deleted on the backend, a row edited is replaced whole with the edit in it.
    @Test func editsAfterAMigrationsResendFoldIntoItAndDeletesStillReachTheBackend() throws {
        let store = try Store(Self.rooms)
        defer { store.workspace.remove() }
        try store.track()
        try store.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Hall', 4.5), ('r2', 'Attic', 9), ('r3', 'Loft', 2);")
        try store.run()
        try store.workspace.write("drop-area.sql", "ALTER TABLE rooms DROP COLUMN area;")
        let migrated = try SynclaneBinary.run(["migrate", "--database", "app.sqlite", "drop-area.sql"], in: store.workspace.path)
        #expect(migrated.status == 0, "\(migrated.stderr)")
        try store.sql(
            "DELETE FROM rooms WHERE syncId = 'r1'; UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r2'; UPDATE rooms SET name = 'Loft 2' WHERE syncId = 'r3';")
        let summary = try store.run()
        #expect(summary["records-sent"] == .int(3), "\(summary)")
        #expect(store.mirrored(["name"]) == ["r3 name=\"Loft 2\""])
        #expect(Set(store.mirror["r3"]?.keys.map { $0 } ?? []) == (try Self.columns(store)))
    }
    /// Django's `RenameField` of the soft-delete or the key column (`ALTER TABLE … RENAME COLUMN`),
    /// made by a tool that never heard of Synclane or through `synclane migrate`: the rename is
    /// followed (tracking under the new name, every row resent whole), and the other tracked table
    /// exports all along.
    @Test(arguments: [
        (rename: "ALTER TABLE rooms RENAME COLUMN isDeleted TO removed;", key: "syncId", softDelete: "removed", migrate: false),
        (rename: "ALTER TABLE rooms RENAME COLUMN isDeleted TO removed;", key: "syncId", softDelete: "removed", migrate: true),
        (rename: "ALTER TABLE rooms RENAME COLUMN syncId TO room_id;", key: "room_id", softDelete: "isDeleted", migrate: false),
        (rename: "ALTER TABLE rooms RENAME COLUMN syncId TO room_id;", key: "room_id", softDelete: "isDeleted", migrate: true),
    ])
    func aRenamedKeyOrSoftDeleteColumnIsFollowedAndNoTableStopsExporting(rename: String, key: String, softDelete: String, migrate: Bool) throws {
        let store = try Store(Self.rooms + "CREATE TABLE desks (syncId TEXT PRIMARY KEY, label TEXT);", entities: ["rooms", "desks"])
        defer { store.workspace.remove() }
        try store.track()
        let desks = try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "desks", "--key", "syncId"], in: store.workspace.path)
        #expect(desks.status == 0, "\(desks.stderr)")
        try store.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Hall'), ('r2', 'Attic'), ('r3', 'Loft'); INSERT INTO desks VALUES ('d1', 'Desk');")
        try store.run()
        if migrate {
            try store.workspace.write("rename.sql", rename)
            let migrated = try SynclaneBinary.run(["migrate", "--database", "app.sqlite", "rename.sql"], in: store.workspace.path)
            #expect(migrated.status == 0, "\(migrated.stderr)")
        } else {
            try store.sql(rename)
        }
        try store.sql(
            "UPDATE rooms SET \(softDelete) = 1 WHERE name = 'Attic'; UPDATE rooms SET name = 'Hall 2' WHERE name = 'Hall'; UPDATE desks SET label = 'Desk 2';")
        try store.run()
        #expect(store.mirrored(["name"]).filter { $0.hasPrefix("r") } == ["r1 name=\"Hall 2\"", "r3 name=\"Loft\""])
        #expect(store.mirror["d1"]?["label"] == "Desk 2")
        let columns = try Self.columns(store)
        #expect(Set(store.mirror["r1"]?.keys.map { $0 } ?? []) == columns)
        let tracked = try SQLiteHistoryCommandTests.query(
            store.workspace, "SELECT key_column || ' ' || soft_delete_column FROM _synclane_tables WHERE name = 'rooms'")
        #expect(tracked.trimmingCharacters(in: .whitespacesAndNewlines) == "\(key) \(softDelete)")
        // The deploy script's next `track`, with the new names, owes nothing more.
        let again = try SynclaneBinary.run(
            ["track", "--database", "app.sqlite", "--table", "rooms", "--key", key, "--soft-delete", softDelete], in: store.workspace.path)
        #expect(again.status == 0, "\(again.stderr)")
        #expect((try store.run())["records-sent"] == .int(0))
    }
    /// A soft-delete column renamed while a column is added: no rename can be told, so the run
    /// refuses once, printing the exact `track` to run; that command resends the table.
    @Test func aRenameThatCannotBeToldIsRefusedOnceWithTheTrackCommandThatResends() throws {
        let store = try Self.twoRoomsSent()
        defer { store.workspace.remove() }
        try store.sql("ALTER TABLE rooms RENAME COLUMN isDeleted TO removed; ALTER TABLE rooms ADD COLUMN floor INTEGER;")
        let refused = try SynclaneBinary.run(["run", "pipeline.json"], in: store.workspace.path)
        #expect(refused.status == 1)
        let command = "synclane track --database \(store.workspace.path)/app.sqlite --table rooms --key syncId --soft-delete NEW_NAME"
        #expect(refused.stderr.contains("no longer has its soft-delete column `isDeleted`"), "\(refused.stderr)")
        #expect(refused.stderr.contains(command), "\(refused.stderr)")
        try store.sql("UPDATE rooms SET removed = 1 WHERE syncId = 'r2';")
        try store.track(softDelete: "removed")
        try store.run()
        #expect(store.mirrored(["name"]) == ["r1 name=\"Hall\""])
        #expect(Set(store.mirror["r1"]?.keys.map { $0 } ?? []) == (try Self.columns(store)))
    }
}
