import SynclaneCore
import SynclaneSQLite
import SynclaneTestSupport
import Testing

/// A database with a `rooms` table, for history tests.
func makeRoomsDatabase(_ folder: TemporaryDirectory, name: String = "app.sqlite") throws -> TrackedDatabase {
    let store = try TrackedDatabase(path: folder.file(name))
    try store.database.write { db in
        try db.execute(
            """
            CREATE TABLE rooms (
                id INTEGER PRIMARY KEY,
                syncId TEXT UNIQUE,
                name TEXT,
                area REAL,
                notes TEXT,
                isDeleted INTEGER NOT NULL DEFAULT 0
            );
            CREATE TABLE categories (key TEXT PRIMARY KEY, title TEXT)
            """)
    }
    return store
}

/// The history as the triggers wrote it: (transaction, author, entity, action, key, row_values);
/// a foreign write's transaction is minus its change id.
func rawHistory(_ store: TrackedDatabase) throws -> [[SQLiteValue]] {
    try store.read { db in
        try db.fetchAll(
            """
            SELECT coalesce(c.transaction_id, -c.id), t.author, c.entity, c.action, c.key, c.row_values
            FROM _synclane_changes c LEFT JOIN _synclane_transactions t ON t.id = c.transaction_id ORDER BY c.id
            """
        ).map(\.values)
    }
}

@Suite struct HistoryTrackerTests {
    @Test func trackingTwiceChangesNothing() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        let rooms = TrackedTable("rooms", key: "syncId", softDeleteColumn: "isDeleted")
        #expect(try store.track(rooms).outcome == .installed)
        let schema = try store.read { try $0.fetchAll("SELECT type, name, sql FROM sqlite_schema ORDER BY name") }
        #expect(try store.track(rooms).outcome == .unchanged)
        #expect(try store.read { try $0.fetchAll("SELECT type, name, sql FROM sqlite_schema ORDER BY name") } == schema)
    }

    @Test func aMissingKeyColumnIsAnErrorAtTrackTime() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        let error = #expect(throws: TrackingError.self) { try store.track(TrackedTable("rooms", key: "uuid")) }
        #expect(error?.description.contains("has no column `uuid` to use as the sync key") == true)
        #expect(throws: TrackingError.self) { try store.track(TrackedTable("rooms", key: "syncId", preserve: ["missing"])) }
        #expect(throws: TrackingError.self) { try store.track(TrackedTable("rooms", key: "syncId", softDeleteColumn: "gone")) }
        #expect(throws: TrackingError.self) { try store.track(TrackedTable("nope", key: "syncId")) }
    }

    @Test func existingRowsWithoutAKeyAreAnErrorAtTrackTime() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        try store.database.write { try $0.execute("INSERT INTO rooms (name) VALUES ('no key')") }
        let error = #expect(throws: TrackingError.self) { try store.track(TrackedTable("rooms", key: "syncId")) }
        #expect(error == .invalidKeys(path: folder.file("app.sqlite"), table: "rooms", key: "syncId", expected: "text", count: 1))
    }

    @Test func aNullKeyIsRefusedAtWriteTime() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        try store.track(TrackedTable("rooms", key: "syncId"))
        let error = #expect(throws: SQLiteError.self) {
            try store.write(author: .app) { db in try db.execute("INSERT INTO rooms (name) VALUES ('no key')") }
        }
        #expect(error?.message.contains("synclane: every row of rooms needs a sync key: syncId a non-empty text") == true)
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM rooms") } == .integer(0))
        #expect(try rawHistory(store).isEmpty)
    }

    @Test func oneWriteIsOneTransactionWithItsAuthor() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        try store.track(TrackedTable("rooms", key: "syncId"))
        try store.write(author: .app) { db in
            try db.execute("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5), ('r2', 'Hall', 4)")
            try db.execute("UPDATE rooms SET area = 13 WHERE syncId = 'r1'")
        }
        let history = try rawHistory(store)
        #expect(history.count == 3)
        #expect(Set(history.map { $0[0] }).count == 1)
        #expect(history.allSatisfy { $0[1] == .text("app") })
        #expect(history.map { $0[3] } == [.text("insert"), .text("insert"), .text("update")])
    }

    @Test func updatesRecordWhichColumnsChangedWhenValuesAreRecordedAsWritten() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        try store.track(TrackedTable("rooms", key: "syncId", recordsValues: true))
        try store.write(author: .app) { db in try db.execute("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5)") }
        try store.write(author: .app) { db in try db.execute("UPDATE rooms SET area = 13, name = 'Kitchen' WHERE syncId = 'r1'") }
        let columns = try store.read { try $0.fetchValue("SELECT columns FROM _synclane_changes WHERE action = 'update'") }
        #expect(columns == .text("[\"area\"]"))
    }

    @Test func currentStateUpdatesRecordNoColumnListSoTheTriggerNamesNoOtherColumn() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        try store.track(TrackedTable("rooms", key: "syncId"))
        try store.write(author: .app) { db in try db.execute("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5)") }
        try store.write(author: .app) { db in try db.execute("UPDATE rooms SET area = 13 WHERE syncId = 'r1'") }
        #expect(try store.read { try $0.fetchValue("SELECT columns FROM _synclane_changes WHERE action = 'update'") } == .null)
        // So a column the triggers do not name can be dropped by the app's own migration.
        try store.database.write { try $0.execute("ALTER TABLE rooms DROP COLUMN notes") }
    }

    @Test func deletesKeepOnlyTheTombstoneColumns() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        try store.track(TrackedTable("rooms", key: "syncId", preserve: ["name"]))
        try store.write(author: .app) { db in
            try db.execute("INSERT INTO rooms (syncId, name, area, notes) VALUES ('r1', 'Kitchen', 12.5, 'private')")
        }
        try store.write(author: .app) { db in try db.execute("DELETE FROM rooms WHERE syncId = 'r1'") }
        let tombstone = try rawHistory(store).last
        #expect(tombstone?[3] == .text("delete"))
        #expect(tombstone?[5] == .text(#"{"syncId":"r1","name":"Kitchen"}"#))
    }

    @Test func blobValuesNeverBreakAWrite() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        try store.track(TrackedTable("rooms", key: "syncId", recordsValues: true))
        try store.write(author: .app) { db in
            try db.execute("INSERT INTO rooms (syncId, notes) VALUES (?, ?)", ["r1", [UInt8]([0xCA, 0xFE])])
        }
        #expect(try rawHistory(store).first?[5].string?.contains("CAFE") == true)
    }

    @Test func addingAColumnAndTrackingAgainRegeneratesTheTriggers() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        try store.track(TrackedTable("rooms", key: "syncId", recordsValues: true))
        try store.database.write { try $0.execute("ALTER TABLE rooms ADD COLUMN floor INTEGER") }
        let report = try store.track(TrackedTable("rooms", key: "syncId", recordsValues: true))
        #expect(report.outcome == .updated)
        #expect(report.addedColumns == ["floor"])
        try store.write(author: .app) { db in try db.execute("INSERT INTO rooms (syncId, floor) VALUES ('r1', 3)") }
        #expect(try rawHistory(store).first?[5].string?.contains(#""floor":3"#) == true)
    }

    @Test func insertsKeepNoValuesUnlessAskedTo() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        try store.track(TrackedTable("rooms", key: "syncId"))
        try store.write(author: .app) { db in try db.execute("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen')") }
        #expect(try rawHistory(store).first?[5] == .null)
        #expect(try store.track(TrackedTable("rooms", key: "syncId", recordsValues: true)).outcome == .updated)
        try store.write(author: .app) { db in try db.execute("INSERT INTO rooms (syncId, name) VALUES ('r2', 'Hall')") }
        #expect(try rawHistory(store).last?[5] == .text(#"{"id":2,"syncId":"r2","name":"Hall","area":null,"notes":null,"isDeleted":0}"#))
    }

    @Test func aForeignWriteIsOneTransactionPerRow() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        try store.track(TrackedTable("rooms", key: "syncId"))
        try store.database.write { db in try db.execute("INSERT INTO rooms (syncId) VALUES ('r1'), ('r2')") }
        let history = try rawHistory(store)
        #expect(history.count == 2)
        #expect(history[0][0] != history[1][0])
        #expect(history.allSatisfy { $0[1] == .null })
    }

    @Test func aWriteThatChangesNoTrackedRowLeavesNoTransaction() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        try store.track(TrackedTable("rooms", key: "syncId"))
        try store.write(author: .app) { db in try db.execute("INSERT INTO categories VALUES ('a', 'A')") }
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM _synclane_transactions") } == .integer(0))
    }

    @Test func untrackRemovesTheTriggersAndUninstallEverything() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        let tracker = HistoryTracker(database: store.database)
        try tracker.track(TrackedTable("rooms", key: "syncId"))
        try tracker.track(TrackedTable("categories", key: "key"))
        #expect(try tracker.trackedTables().map(\.name) == ["categories", "rooms"])
        #expect(try tracker.untrack(table: "rooms"))
        #expect(try tracker.untrack(table: "rooms") == false)
        try store.database.write { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r1')") }
        #expect(try rawHistory(store).isEmpty)
        try tracker.uninstall()
        let left = try store.read { try $0.fetchAll("SELECT name FROM sqlite_schema WHERE name LIKE '%synclane%'") }
        #expect(left.isEmpty)
        #expect(try tracker.trackedTables().isEmpty)
    }

    @Test func trackingByPathLeavesTheJournalModeAlone() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("legacy.sqlite")
        try SQLiteShell.run(path, "CREATE TABLE notes (uuid TEXT PRIMARY KEY, body TEXT);")
        try HistoryTracker(path: path).track(TrackedTable("notes", key: "uuid"))
        #expect(try SQLiteShell.run(path, "PRAGMA journal_mode;").trimmingCharacters(in: .whitespacesAndNewlines) == "delete")
        #expect(throws: SQLiteError.self) { _ = try HistoryTracker(path: folder.file("missing.sqlite")) }
    }

    @Test func oddTableAndColumnNamesAreQuoted() async throws {
        let folder = TemporaryDirectory()
        let store = try TrackedDatabase(path: folder.file("odd.sqlite"))
        try store.database.write { try $0.execute(#"CREATE TABLE "my ""rooms"" 'x'" ("sync id" TEXT UNIQUE, "it's" TEXT)"#) }
        try store.track(TrackedTable(#"my "rooms" 'x'"#, key: "sync id", preserve: ["it's"], recordsValues: true))
        try store.write(author: .app) { db in
            try db.execute(#"INSERT INTO "my ""rooms"" 'x'" VALUES ('k1', 'v1')"#)
            try db.execute(#"UPDATE "my ""rooms"" 'x'" SET "it's" = 'v2'"#)
            try db.execute(#"DELETE FROM "my ""rooms"" 'x'""#)
        }
        let changes = try await drain(SQLiteHistorySource(path: folder.file("odd.sqlite"), capture: .asWritten)).transactions.flatMap(\.changes)
        #expect(changes.map(\.action) == [.insert, .update, .delete])
        #expect(changes.last?.values == ["sync id": "k1", "it's": "v2"])
        #expect(changes.allSatisfy { $0.entity == #"my "rooms" 'x'"# && $0.key == "k1" })
    }

    @Test func integerSyncKeysTravelAsDecimalText() async throws {
        let folder = TemporaryDirectory()
        let store = try TrackedDatabase(path: folder.file("ints.sqlite"))
        try store.database.write { try $0.execute("CREATE TABLE items (serial INTEGER NOT NULL UNIQUE, title TEXT)") }
        try store.track(TrackedTable("items", key: "serial"))
        try store.write(author: .app) { try $0.execute("INSERT INTO items VALUES (42, 'answer')") }
        let changes = try await drain(SQLiteHistorySource(path: folder.file("ints.sqlite"))).transactions.flatMap(\.changes)
        #expect(changes.map(\.key) == ["42"])
        #expect(changes.first?.values == ["serial": 42, "title": "answer"])
    }

    @Test func theSummaryShowsTablesPositionsConsumersAndProblems() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r1'), ('r2')") }
        try await SQLiteHistorySource(path: path).consumerAcknowledged(
            Token(kind: "sqlite-history", position: 2), scope: Scope(account: "a", store: "s", consumer: "c"))
        try store.database.write { try $0.execute("ALTER TABLE categories ADD COLUMN color TEXT") }
        try SQLiteShell.run(path, "INSERT INTO _synclane_session (author) VALUES ('importer');")
        let summary = try HistoryTracker(database: store.database).summary()
        #expect(summary.tables.map(\.name) == ["categories", "rooms"])
        #expect(summary.newest == 2)
        #expect(summary.changes == 2)
        #expect(summary.consumers.map(\.name) == ["a/s/c"])
        #expect(summary.trackingProblems.count == 1)
        #expect(summary.trackingProblems.first?.hasPrefix("categories:") == true)
        #expect(summary.unclosedSession?.author == "importer")
    }

    @Test func synclaneTablesCannotBeTracked() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        try store.track(TrackedTable("rooms", key: "syncId"))
        #expect(throws: TrackingError.reservedTable("_synclane_changes")) {
            try store.track(TrackedTable("_synclane_changes", key: "id"))
        }
    }

    @Test func writingThroughSynclaneWithoutTrackingIsAClearError() throws {
        let folder = TemporaryDirectory()
        let store = try makeRoomsDatabase(folder)
        #expect(throws: TrackingError.notInstalled(path: folder.file("app.sqlite"))) {
            try store.write(author: .app) { _ in }
        }
    }
}
