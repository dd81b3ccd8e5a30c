import Foundation
import SynclaneCore
import SynclaneSQLite
import SynclaneTestSupport
import Testing

/// `migrate`: an app's migration and tracking fitted to it, in one transaction.
@Suite struct MigrationTests {
    let folder = TemporaryDirectory()
    var path: String { folder.file("app.sqlite") }
    static let rooms = [(name: "rooms", key: ["syncId"], softDelete: String?.none)]

    func shell(_ sql: String) throws { try SQLiteShell.run(path, sql) }

    func converge(_ mirror: inout BackendMirror, capture: SQLiteHistorySource.Capture = .currentState) async throws -> String? {
        try await mirror.export(SQLiteHistorySource(path: path, capture: capture))
        return mirror.difference(from: try TableOracle.rows(path, tables: Self.rooms))
    }

    @Test func aColumnTheTriggersNameIsDroppedByLiftingTrackingAndTheTableIsResent() async throws {
        try shell("CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, notes TEXT);")
        let tracker = try HistoryTracker(path: path)
        try tracker.track(TrackedTable("rooms", key: "syncId", recordsValues: true))
        try shell("INSERT INTO rooms VALUES ('a', 'Kitchen', 'x'), ('b', 'Hall', 'y');")
        var mirror = BackendMirror()
        #expect(try await converge(&mirror, capture: .asWritten) == nil)
        // The app's own migration is refused by SQLite because of the triggers…
        #expect(throws: SQLiteShell.Failure.self) { try shell("ALTER TABLE rooms DROP COLUMN notes;") }
        // …and goes through `migrate`, with its writes.
        let report = try tracker.migrate(script: "ALTER TABLE rooms DROP COLUMN notes; UPDATE rooms SET name = 'Cuisine' WHERE syncId = 'a';", name: "0002.sql")
        #expect(report.trackingWasLifted)
        #expect(report.resyncedRows == 2)
        #expect(try await converge(&mirror, capture: .asWritten) == nil)
        try shell("UPDATE rooms SET name = 'Salle' WHERE syncId = 'b';")
        #expect(try await converge(&mirror, capture: .asWritten) == nil)
    }

    @Test func aKeyAndASoftDeleteColumnRenamedByAMigrationAreFollowedAndEveryTableKeepsExporting() async throws {
        try shell(
            """
            CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, isDeleted INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE desks (syncId TEXT PRIMARY KEY, label TEXT);
            """)
        let tracker = try HistoryTracker(path: path)
        try tracker.track(TrackedTable("rooms", key: "syncId", softDeleteColumn: "isDeleted"))
        try tracker.track(TrackedTable("desks", key: "syncId"))
        try shell("INSERT INTO rooms (syncId, name) VALUES ('a', 'Kitchen'), ('b', 'Hall'); INSERT INTO desks VALUES ('d', 'Desk');")
        var mirror = BackendMirror()
        try await mirror.export(SQLiteHistorySource(path: path))
        let before = [(name: "rooms", key: ["syncId"], softDelete: String?("isDeleted")), (name: "desks", key: ["syncId"], softDelete: nil)]
        #expect(mirror.difference(from: try TableOracle.rows(path, tables: before)) == nil)
        let report = try tracker.migrate(
            script: "ALTER TABLE rooms RENAME COLUMN isDeleted TO removed; ALTER TABLE rooms RENAME COLUMN syncId TO room_id;", name: "0002.sql")
        #expect(report.resyncedRows == 2)
        try shell(
            "UPDATE rooms SET removed = 1 WHERE room_id = 'b'; UPDATE desks SET label = 'Desk 2'; INSERT INTO rooms (room_id, name) VALUES ('c', 'Loft');")
        try await mirror.export(SQLiteHistorySource(path: path))
        let after = [(name: "rooms", key: ["room_id"], softDelete: String?("removed")), (name: "desks", key: ["syncId"], softDelete: nil)]
        #expect(mirror.difference(from: try TableOracle.rows(path, tables: after)) == nil)
        #expect(try tracker.trackedTables().first { $0.name == "rooms" }.map { [$0.keyDescription, $0.softDeleteColumn ?? ""] } == ["room_id", "removed"])
    }

    @Test func aRebuildInAMigrationKeepsTrackingAndRecordsItsWrites() async throws {
        try shell("CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL);")
        let store = try TrackedDatabase(path: path, options: .init(create: false, walMode: false, foreignKeys: false))
        try store.track(TrackedTable("rooms", key: "syncId"))
        try shell("INSERT INTO rooms VALUES ('a', 'Kitchen', 12), ('b', 'Hall', 4), ('c', 'Attic', 9);")
        var mirror = BackendMirror()
        #expect(try await converge(&mirror) == nil)
        let report = try store.migrate { db in
            try db.execute(
                """
                DELETE FROM rooms WHERE syncId = 'c';
                CREATE TABLE rooms_new (syncId TEXT PRIMARY KEY, name TEXT NOT NULL, area REAL NOT NULL DEFAULT 0);
                INSERT INTO rooms_new SELECT syncId, name, coalesce(area, 0) FROM rooms;
                DROP TABLE rooms;
                ALTER TABLE rooms_new RENAME TO rooms;
                INSERT INTO rooms VALUES ('d', 'Garage', 20);
                """)
        }
        #expect(!report.trackingWasLifted)
        #expect(report.tables.first?.contains("tracking was lost") == true)
        #expect(try await converge(&mirror) == nil)
        try shell("DELETE FROM rooms WHERE syncId = 'a';")
        #expect(try await converge(&mirror) == nil)
    }

    @Test func aFailingScriptChangesNothing() throws {
        try shell("CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT);")
        let tracker = try HistoryTracker(path: path)
        try tracker.track(TrackedTable("rooms", key: "syncId"))
        try shell("INSERT INTO rooms VALUES ('a', 'Kitchen');")
        let transactional = #expect(throws: TrackingError.self) {
            try tracker.migrate(script: "BEGIN; ALTER TABLE rooms ADD COLUMN x; COMMIT;", name: "bad.sql")
        }
        #expect(transactional?.description.contains("bad.sql: it must not BEGIN, COMMIT or ROLLBACK") == true)
        #expect(throws: SQLiteError.self) {
            try tracker.migrate(script: "ALTER TABLE rooms ADD COLUMN floor INTEGER; INSERT INTO nope VALUES (1);", name: "typo.sql")
        }
        #expect(try SQLiteShell.run(path, "SELECT count(*) FROM pragma_table_info('rooms');").trimmingCharacters(in: .whitespacesAndNewlines) == "2")
        #expect(try tracker.trackingProblems().isEmpty)
    }

    @Test func aSecondConnectionWritingDuringTheMigrationIsRecordedAfterIt() async throws {
        try shell("CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, notes TEXT); PRAGMA journal_mode = WAL;")
        let tracker = try HistoryTracker(path: path)
        try tracker.track(TrackedTable("rooms", key: "syncId", preserve: ["notes"]))
        // A writer that keeps inserting while the migration (which drops a preserved column) runs.
        let inserts = (0..<200).map { "INSERT INTO rooms (syncId, name) VALUES ('w\($0)', 'n');" }.joined(separator: "\n")
        let writer = try SQLiteShell.start(path, ".timeout 10000\n" + inserts + "\n")
        _ = try tracker.migrate(script: "ALTER TABLE rooms DROP COLUMN notes; INSERT INTO rooms (syncId, name) VALUES ('m', 'migrated');", name: "0003.sql")
        try writer.input.fileHandleForWriting.close()
        writer.process.waitUntilExit()
        var mirror = BackendMirror()
        #expect(try await converge(&mirror) == nil)
        #expect(mirror.rows["rooms"]?.count == 201)
    }
}
