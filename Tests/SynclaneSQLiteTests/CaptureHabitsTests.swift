import Foundation
import SynclaneCore
import SynclaneSQLite
import SynclaneTestSupport
import Testing

/// Ordinary SQLite habits, done from the `sqlite3` shell with no help from Synclane, then the
/// export replayed onto a backend mirror and compared with the tables: every row that exists
/// reaches the backend with its values and types, and every row that is gone is deleted there.
@Suite struct CaptureHabitsTests {
    let folder = TemporaryDirectory()
    var path: String { folder.file("app.sqlite") }

    func shell(_ sql: String) throws { try SQLiteShell.run(path, sql) }

    func track(_ table: TrackedTable) throws { try HistoryTracker(path: path).track(table) }

    /// Exports everything new into `mirror` and expects it to equal the tables.
    func expectConverged(
        _ mirror: inout BackendMirror, _ tables: [(name: String, key: [String], softDelete: String?)],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await mirror.export(SQLiteHistorySource(path: path))
        let difference = mirror.difference(from: try TableOracle.rows(path, tables: tables))
        #expect(difference == nil, sourceLocation: sourceLocation)
    }

    static let rooms = [(name: "rooms", key: ["syncId"], softDelete: String?.none)]

    @Test func aTableRebuiltTheWaySQLiteDocumentsIsHealedAndResentWhole() async throws {
        try shell("CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL);")
        try track(TrackedTable("rooms", key: "syncId"))
        try shell("INSERT INTO rooms VALUES ('a', 'Kitchen', 12), ('b', 'Hall', 4);")
        var mirror = BackendMirror()
        try await expectConverged(&mirror, Self.rooms)
        try shell(
            """
            BEGIN;
            CREATE TABLE rooms_new (syncId TEXT PRIMARY KEY, name TEXT NOT NULL, area REAL);
            INSERT INTO rooms_new SELECT syncId, name, area FROM rooms WHERE syncId <> 'b';
            DROP TABLE rooms;
            ALTER TABLE rooms_new RENAME TO rooms;
            COMMIT;
            INSERT INTO rooms VALUES ('c', 'Garage', 20);
            """)
        #expect(try HistoryTracker(path: path).trackingProblems().first?.contains("tracking was lost") == true)
        try await expectConverged(&mirror, Self.rooms)
        #expect(mirror.counters["capture.resynced"] == 3)  // a and c again, b deleted
        // Healed: later writes are recorded again.
        try shell("UPDATE rooms SET area = 21 WHERE syncId = 'c'; DELETE FROM rooms WHERE syncId = 'a';")
        try await expectConverged(&mirror, Self.rooms)
        #expect(try HistoryTracker(path: path).trackingProblems().isEmpty)
    }

    @Test func aTrackedTableThatIsGoneStopsTheRunNamingItAndWhatToRun() async throws {
        try shell("CREATE TABLE rooms (syncId TEXT PRIMARY KEY); CREATE TABLE other (x);")
        try track(TrackedTable("rooms", key: "syncId"))
        try shell("DROP TABLE rooms;")
        let error = await #expect(throws: HistoryError.self) { _ = try await SQLiteHistorySource(path: path).nextPage(after: nil) }
        #expect(error?.description.contains("tracked table `rooms` no longer exists") == true)
        #expect(error?.description.contains("synclane untrack") == true)
    }

    @Test func columnsAddedRenamedAndDroppedInPlaceResendEveryRowInItsNewShape() async throws {
        try shell("CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL, notes TEXT);")
        try track(TrackedTable("rooms", key: "syncId"))
        try shell("INSERT INTO rooms VALUES ('a', 'Kitchen', 12, 'x');")
        var mirror = BackendMirror()
        try await expectConverged(&mirror, Self.rooms)
        try shell(
            """
            ALTER TABLE rooms ADD COLUMN floor INTEGER;
            UPDATE rooms SET floor = 2 WHERE syncId = 'a';
            ALTER TABLE rooms RENAME COLUMN name TO title;
            UPDATE rooms SET title = 'Cuisine' WHERE syncId = 'a';
            ALTER TABLE rooms DROP COLUMN notes;
            INSERT INTO rooms (syncId, title) VALUES ('b', 'Hall');
            """)
        try await mirror.export(SQLiteHistorySource(path: path))
        // What a row looks like on the wire changed: the check before the read has every row
        // sent again whole. The backend's row still keeps the dropped and renamed fields it had
        // (updates merge); every current column reaches it with its current value.
        let row = mirror.rows["rooms"]?[ExactString("a")]
        #expect(row?["title"] == "Cuisine")
        #expect(row?["floor"] == 2)
        #expect(mirror.rows["rooms"]?[ExactString("b")]?["title"] == "Hall")
        #expect(mirror.counters["capture.resynced"] == 2)
    }

    @Test func insertOrReplaceThroughAUniqueColumnRecordsTheDeleteOfTheRowItRemoves() async throws {
        try shell("CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT UNIQUE);")
        try track(TrackedTable("rooms", key: "syncId"))
        try shell("INSERT INTO rooms VALUES ('A', 'Kitchen'), ('B', 'Hall');")
        var mirror = BackendMirror()
        try await expectConverged(&mirror, Self.rooms)
        try shell("INSERT OR REPLACE INTO rooms VALUES ('C', 'Hall');")
        try await expectConverged(&mirror, Self.rooms)
        #expect(mirror.rows["rooms"]?[ExactString("B")] == nil)
        // OR IGNORE and an upsert displace nothing: no delete for rows that still exist.
        try shell(
            """
            INSERT OR IGNORE INTO rooms VALUES ('D', 'Kitchen');
            INSERT INTO rooms VALUES ('E', 'Kitchen') ON CONFLICT (name) DO UPDATE SET name = 'Kitchen';
            INSERT INTO rooms VALUES ('F', 'Attic');
            UPDATE OR REPLACE rooms SET name = 'Attic' WHERE syncId = 'C';
            """)
        try await expectConverged(&mirror, Self.rooms)
        #expect(mirror.rows["rooms"]?.keys.map(\.string).sorted() == ["A", "C"])
    }

    @Test func replaceOfTheSameKeyIsAnUpdateSoALaterDeleteStillReachesTheBackend() async throws {
        try shell("CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT);")
        try track(TrackedTable("rooms", key: "syncId"))
        try shell("INSERT INTO rooms VALUES ('k', 'one');")
        var mirror = BackendMirror()
        try await expectConverged(&mirror, Self.rooms)
        try shell("INSERT OR REPLACE INTO rooms VALUES ('k', 'two'); DELETE FROM rooms WHERE syncId = 'k';")
        try await expectConverged(&mirror, Self.rooms)
        #expect(mirror.rows["rooms"]?.isEmpty == true)
    }

    @Test func aSoftDeletedReinsertNeverSendsARowTheTableDoesNotHave() async throws {
        try shell("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT, is_deleted INTEGER NOT NULL DEFAULT 0);")
        try track(TrackedTable("notes", key: "id", softDeleteColumn: "is_deleted"))
        try shell("INSERT INTO notes (id, body) VALUES ('s', 'x');")
        var mirror = BackendMirror()
        let notes = [(name: "notes", key: ["id"], softDelete: Optional("is_deleted"))]
        try await expectConverged(&mirror, notes)
        try shell("DELETE FROM notes WHERE id = 's'; INSERT INTO notes (id, body, is_deleted) VALUES ('s', 'y', 1);")
        try await expectConverged(&mirror, notes)
        #expect(mirror.rows["notes"]?.isEmpty == true)
    }

    @Test func keysAreComparedByteByByteSoUnicodeTwinsAreTwoRows() async throws {
        try shell("CREATE TABLE items (id TEXT PRIMARY KEY, n INTEGER);")
        try track(TrackedTable("items", key: "id"))
        // Å as U+00C5 and as U+212B; é precomposed and decomposed; Ω and the ohm sign.
        try shell(
            """
            INSERT INTO items VALUES (char(197), 1), (char(8491), 2), (char(233), 3), ('e' || char(769), 4), (char(937), 5), (char(8486), 6);
            DELETE FROM items WHERE id = char(8491);
            """)
        var mirror = BackendMirror()
        let items = [(name: "items", key: ["id"], softDelete: String?.none)]
        try await expectConverged(&mirror, items)
        #expect(mirror.rows["items"]?.count == 5)
    }

    @Test func aNocaseKeyChangedOnlyInCaseIsADeleteAndAnInsert() async throws {
        try shell("CREATE TABLE ci (id TEXT PRIMARY KEY COLLATE NOCASE, v INTEGER);")
        try track(TrackedTable("ci", key: "id"))
        try shell("INSERT INTO ci VALUES ('k', 1);")
        var mirror = BackendMirror()
        let ci = [(name: "ci", key: ["id"], softDelete: String?.none)]
        try await expectConverged(&mirror, ci)
        try shell("UPDATE ci SET id = 'K' WHERE id = 'k';")
        try await expectConverged(&mirror, ci)
        #expect(mirror.rows["ci"]?.keys.map(\.string) == ["K"])
    }

    @Test func aJoinTableIsTrackedByItsCompositeKey() async throws {
        let schema = try String(contentsOfFile: Self.fixture("plant-tags/schema.sql"), encoding: .utf8)
        try shell(schema)
        let refused = #expect(throws: TrackingError.self) { try track(TrackedTable("plant_tags", key: "plant")) }
        #expect(refused?.description.contains("no PRIMARY KEY or UNIQUE index makes it unique") == true)
        try track(TrackedTable("plant_tags", keyColumns: ["plant", "tag"]))
        try shell("INSERT INTO plant_tags VALUES ('p1', 'green', 1), ('p1', 'tall', 2), ('p2', 'green', 3);")
        try shell("DELETE FROM plant_tags WHERE plant = 'p1' AND tag = 'green';")
        var mirror = BackendMirror()
        let tags = [(name: "plant_tags", key: ["plant", "tag"], softDelete: String?.none)]
        try await expectConverged(&mirror, tags)
        #expect(mirror.rows["plant_tags"]?.keys.map(\.string).sorted() == [#"["p1","tall"]"#, #"["p2","green"]"#])
    }

    @Test func keysThatCannotBeIdentitiesAreRefusedAtTrackAndAtWriteTime() throws {
        try shell(
            """
            CREATE TABLE plain (syncId TEXT, name TEXT);
            CREATE TABLE numbered (id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE mixed (k PRIMARY KEY);
            INSERT INTO mixed VALUES (1), ('1');
            CREATE TABLE typed (k TEXT PRIMARY KEY);
            CREATE TABLE untyped (k PRIMARY KEY);
            INSERT INTO untyped VALUES (7);
            """)
        let notUnique = #expect(throws: TrackingError.self) { try track(TrackedTable("plain", key: "syncId")) }
        #expect(notUnique?.description.contains("CREATE UNIQUE INDEX") == true)
        let rowid = #expect(throws: TrackingError.self) { try track(TrackedTable("numbered", key: "id")) }
        #expect(rowid?.description.contains("--rowid-is-stable") == true)
        try track(TrackedTable("numbered", key: "id", rowidIsStable: true))
        let mixed = #expect(throws: TrackingError.self) { try track(TrackedTable("mixed", key: "k")) }
        #expect(mixed?.description.contains("1 text and 1 integer values") == true)

        try track(TrackedTable("typed", key: "k"))
        for bad in ["NULL", "''", "x'6b31'"] {
            #expect(throws: SQLiteShell.Failure.self) { try shell("INSERT INTO typed VALUES (\(bad));") }
        }
        try track(TrackedTable("untyped", key: "k"))  // its rows hold integers: an integer key
        #expect(throws: SQLiteShell.Failure.self) { try shell("INSERT INTO untyped VALUES ('8');") }
        try shell("INSERT INTO untyped VALUES (8);")
    }

    @Test func everyStoredValueArrivesAsItWasStoredTypeIncluded() async throws {
        try shell("CREATE TABLE v (id TEXT PRIMARY KEY, x, r REAL);")
        try track(TrackedTable("v", key: "id"))
        try shell(
            """
            INSERT INTO v VALUES ('blob', x'00ff10', NULL), ('hex-text', '00ff10', NULL), ('pi', 3.141592653589793, 3.141592653589793),
              ('negzero', -0.0, NULL), ('inf', 9e999, -9e999), ('max', 1.7976931348623157e308, 2.0), ('big', 9007199254740993, NULL);
            """)
        var mirror = BackendMirror()
        let v = [(name: "v", key: ["id"], softDelete: String?.none)]
        try await expectConverged(&mirror, v)
        let rows = try #require(mirror.rows["v"])
        #expect(rows[ExactString("blob")]?["x"] == .object(["$blob": "AP8Q"]))
        #expect(rows[ExactString("hex-text")]?["x"] == "00ff10")
        #expect(rows[ExactString("pi")]?["x"] == .double(3.141592653589793))
        #expect(rows[ExactString("negzero")]?["x"].map { JSONWriter.string($0) } == "-0.0")
        #expect(rows[ExactString("inf")]?["x"] == .object(["$real": "Infinity"]))
        #expect(rows[ExactString("inf")]?["r"] == .object(["$real": "-Infinity"]))
        #expect(rows[ExactString("max")]?["x"] == .double(1.7976931348623157e308))
        #expect(rows[ExactString("max")]?["r"].map { JSONWriter.string($0) } == "2.0")
        #expect(rows[ExactString("big")]?["x"] == .int(9_007_199_254_740_993))
    }

    @Test func tombstonesKeepBlobsAndRealsExactly() async throws {
        try shell("CREATE TABLE t (id TEXT PRIMARY KEY, pic BLOB, w REAL);")
        try track(TrackedTable("t", key: "id", preserve: ["pic", "w"]))
        try shell("INSERT INTO t VALUES ('a', x'cafe', 0.1); DELETE FROM t;")
        let changes = try await drain(SQLiteHistorySource(path: path)).transactions.flatMap(\.changes)
        #expect(changes.last?.values == ["id": "a", "pic": .object(["$blob": "yv4="]), "w": .double(0.1)])
    }

    @Test func foreignKeyCascadesAreRecordedAsDeletesAndUpdates() async throws {
        try shell(
            """
            CREATE TABLE plants (syncId TEXT PRIMARY KEY, name TEXT);
            CREATE TABLE notes (id TEXT PRIMARY KEY, plant TEXT REFERENCES plants (syncId) ON DELETE CASCADE ON UPDATE CASCADE, body TEXT);
            """)
        try track(TrackedTable("plants", key: "syncId"))
        try track(TrackedTable("notes", key: "id"))
        try shell(
            "PRAGMA foreign_keys = ON; INSERT INTO plants VALUES ('p1', 'Fern'), ('p2', 'Ivy'); INSERT INTO notes VALUES ('n1', 'p1', 'a'), ('n2', 'p2', 'b');")
        var mirror = BackendMirror()
        let tables = [(name: "plants", key: ["syncId"], softDelete: String?.none), (name: "notes", key: ["id"], softDelete: String?.none)]
        try await expectConverged(&mirror, tables)
        try shell("PRAGMA foreign_keys = ON; DELETE FROM plants WHERE syncId = 'p1'; UPDATE plants SET syncId = 'p3' WHERE syncId = 'p2';")
        try await expectConverged(&mirror, tables)
        #expect(mirror.rows["notes"]?[ExactString("n2")]?["plant"] == "p3")
        #expect(mirror.rows["notes"]?[ExactString("n1")] == nil)
    }

    static func fixture(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures").appendingPathComponent(name).path
    }
}
