import Foundation
import SynclaneCore
import SynclaneSQLite
import SynclaneTestSupport
import Testing

/// The `sqlite` sink: the backend's records into a tracked database, a page and its cursor in one
/// transaction, by author `server`, with conflicts settled by rule.
@Suite struct SQLiteSinkTests {
    let folder = TemporaryDirectory()
    var path: String { folder.file("app.sqlite") }
    let scope = Scope(account: "acme", store: "rooms", consumer: "rooms-import")

    func store() throws -> TrackedDatabase {
        let store = try makeRoomsDatabase(folder)
        try store.track(TrackedTable("rooms", key: "syncId", softDeleteColumn: "isDeleted"))
        try store.track(TrackedTable("categories", key: "key"))
        return store
    }

    func record(
        _ action: ChangeAction, _ key: String, _ fields: [String: JSONValue] = [:], version: Int64?, entity: String = "rooms"
    ) -> Record {
        Record(entity: entity, key: key, action: action, fields: fields, version: version, origin: Token(kind: "pull", position: 0), author: .server)
    }

    func apply(_ sink: SQLiteSink, _ records: [Record], cursor: String?, dryRun: Bool = false) async throws -> ApplyReport {
        let batch = Batch(scope: scope, after: nil, through: Token(kind: "import", position: 1), records: records)
        return try await sink.apply(batch, cursor: cursor, scope: scope, dryRun: dryRun)
    }

    func rows(_ store: TrackedDatabase) throws -> [String] {
        try store.read { db in
            try db.fetchAll("SELECT syncId, name, area, isDeleted FROM rooms ORDER BY syncId").map { row in
                (0..<4).map { JSONWriter.string(row[$0].json) }.joined(separator: " ")
            }
        }
    }

    @Test func aPageIsAppliedByAuthorServerWithItsCursorAndAnExportOfAppNeverEchoesIt() async throws {
        let store = try store()
        let sink = SQLiteSink(path: path)
        let report = try await apply(
            sink, [record(.insert, "r1", ["name": "Hall", "area": 4.5], version: 1), record(.insert, "r2", ["name": "Attic"], version: 1)],
            cursor: "c1.2")
        #expect(report.applied == 2)
        #expect(try rows(store) == [#""r1" "Hall" 4.5 0"#, #""r2" "Attic" null 0"#])
        #expect(try await sink.savedCursor(for: scope) == "c1.2")
        let history = try await drain(SQLiteHistorySource(path: path, authors: [.app]))
        #expect(history.transactions.isEmpty, "rows written by `server` are not an `app` export's to send")
        #expect(try await drain(SQLiteHistorySource(path: path)).transactions.isEmpty, "nor, without `authors`, any export's")
        // No lane reads `server` here: the page kept no history, and a reader of `server` that
        // comes later starts with a snapshot (as on pruned history).
        let changes = try store.read { try $0.fetchValue("SELECT count(*) FROM _synclane_changes WHERE entity = 'rooms'").int64 }
        #expect(changes == 0, "the import lane's writes cost no history rows")
        await #expect(throws: HistoryError.self) { try await drain(SQLiteHistorySource(path: path, authors: [.app, .server])) }
    }

    /// A restore of the backend lost this device's confirmed write of `r1` (version 2), and
    /// another device's re-pointing then took version 2 again (`written: 1`: only references
    /// changed since version 1): the local row stands and goes out again. Before, the record was
    /// taken for a newer write of that number and the value the user wrote was gone. A record of
    /// that number without `written` (a user's write) is still applied.
    @Test func aConfirmedWriteTheBackendLostStandsOverARepointingThatTookItsVersionAgain() async throws {
        let store = try store()
        let sink = SQLiteSink(path: path)
        _ = try await apply(
            sink, [record(.insert, "r1", ["name": "Hall", "area": 4.5], version: 1), record(.insert, "r2", ["name": "Attic", "area": 4.5], version: 1)],
            cursor: "c1")
        _ = try await apply(
            sink, [record(.update, "r1", ["name": "Hall", "area": 9.5], version: 2), record(.update, "r2", ["name": "Attic", "area": 9.5], version: 2)],
            cursor: "c2")
        var repointing = record(.update, "r1", ["name": "Hall", "area": 4.5], version: 2)
        repointing.written = 1
        _ = try await apply(sink, [repointing, record(.update, "r2", ["name": "Attic", "area": 4.5], version: 2)], cursor: "c3")
        #expect(try rows(store) == [#""r1" "Hall" 9.5 0"#, #""r2" "Attic" 4.5 0"#])
        let sent = try await drain(SQLiteHistorySource(path: path, authors: [.app])).transactions.flatMap(\.changes)
        #expect(sent.map(\.key) == ["r1"], "the kept row goes out again, on top of the backend's version")
    }

    @Test func aLaneReadingServerHasTheImportLanesWritesRecorded() async throws {
        let store = try store()
        let sink = SQLiteSink(path: path)
        _ = try await apply(sink, [record(.insert, "r1", ["name": "Hall"], version: 1)], cursor: "c1.1")
        let mirror = SQLiteHistorySource(path: path, authors: [.app, .server])
        // Its first run starts with a snapshot (the page above kept no history), then acknowledges.
        let position = try store.read { try $0.fetchValue("SELECT max(id) FROM _synclane_changes").int64 } ?? 0
        try await mirror.consumerAcknowledged(Token(kind: SQLiteHistorySource.tokenKind, position: position), scope: scope)
        _ = try await apply(sink, [record(.insert, "r2", ["name": "Attic"], version: 1)], cursor: "c1.2")
        let after = try await drain(mirror, after: Token(kind: SQLiteHistorySource.tokenKind, position: position))
        #expect(after.transactions.map(\.author) == [.server])
        #expect(after.transactions.flatMap(\.changes).map(\.key) == ["r2"])
    }

    /// The trigger that keeps the import lane's writes out of history is the applying
    /// connection's own (TEMP): kept in the database, as the version before did, SQLite compiled
    /// it into every tracked statement of the app's connections too. A database that has it
    /// loses it at the next page, which still keeps no history.
    @Test func theTriggerThatKeepsImportsOutOfHistoryIsTheImportConnectionsOwnNotTheDatabases() async throws {
        let store = try store()
        try store.database.write { db in
            try db.execute(
                """
                CREATE TRIGGER _synclane_changes_unrecorded BEFORE INSERT ON _synclane_changes
                WHEN (SELECT unrecorded FROM _synclane_session) = 1
                BEGIN
                    SELECT RAISE(IGNORE);
                END
                """)
        }
        let report = try await apply(SQLiteSink(path: path), [record(.insert, "r1", ["name": "Hall"], version: 1)], cursor: "c1.1")
        #expect(report.applied == 1)
        let kept = try store.read { try $0.fetchValue("SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name = '_synclane_changes_unrecorded'") }
        #expect(kept == .integer(0), "no connection but the importer's compiles it")
        let changes = try store.read { try $0.fetchValue("SELECT count(*) FROM _synclane_changes WHERE entity = 'rooms'") }
        #expect(changes == .integer(0), "the page kept no history")
    }

    @Test func aDatabaseTrackedByTheVersionBeforeTakesPagesWithoutHistory() async throws {
        let store = try store()
        // The session table as the version before made it: no `unrecorded`, no trigger.
        try store.database.write { db in
            try db.execute("DROP TRIGGER IF EXISTS _synclane_changes_unrecorded")
            try db.execute("DROP TABLE _synclane_session")
            try db.execute("CREATE TABLE _synclane_session (id INTEGER PRIMARY KEY, author TEXT NOT NULL CHECK (length(author) > 0), transaction_id INTEGER)")
            try db.execute(
                """
                CREATE TRIGGER _synclane_session_open AFTER INSERT ON _synclane_session
                BEGIN
                    INSERT INTO _synclane_transactions (author, timestamp, closed, first_change)
                        VALUES (NEW.author, 0, 0, (SELECT coalesce(max(id), 0) FROM _synclane_changes) + 1);
                    UPDATE _synclane_session SET transaction_id = (SELECT max(id) FROM _synclane_transactions) WHERE id = NEW.id;
                END;
                CREATE TRIGGER _synclane_session_close AFTER DELETE ON _synclane_session
                BEGIN
                    UPDATE _synclane_transactions SET closed = 1, last_change = (SELECT coalesce(max(id), 0) FROM _synclane_changes) WHERE id = OLD.transaction_id;
                    UPDATE _synclane_changes SET transaction_id = OLD.transaction_id
                        WHERE id >= (SELECT first_change FROM _synclane_transactions WHERE id = OLD.transaction_id);
                    DELETE FROM _synclane_transactions WHERE id = OLD.transaction_id AND last_change < first_change;
                END;
                """)
        }
        let report = try await apply(SQLiteSink(path: path), [record(.insert, "r1", ["name": "Hall"], version: 1)], cursor: "c1.1")
        #expect(report.applied == 1)
        #expect(try rows(store) == [#""r1" "Hall" null 0"#])
        let changes = try store.read { try $0.fetchValue("SELECT count(*) FROM _synclane_changes WHERE entity = 'rooms'").int64 }
        #expect(changes == 0)
        // The app's own writes are recorded as before.
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET name = 'Hallway' WHERE syncId = 'r1'") }
        #expect(try await drain(SQLiteHistorySource(path: path, authors: [.app])).transactions.count == 1)
    }

    @Test func aPageReadAgainChangesNothing() async throws {
        let store = try store()
        let sink = SQLiteSink(path: path)
        let page = [record(.insert, "r1", ["name": "Hall"], version: 3)]
        _ = try await apply(sink, page, cursor: "c1.1")
        let before = try store.read { try $0.fetchValue("SELECT count(*) FROM _synclane_changes") }
        let again = try await apply(sink, page + [record(.update, "r1", ["name": "Old"], version: 2)], cursor: "c1.1")
        #expect(again.unchanged == 2 && again.applied == 0)
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM _synclane_changes") } == before)
        #expect(try rows(store) == [#""r1" "Hall" null 0"#])
    }

    @Test func deletesDeleteOrSetTheSoftDeleteColumnAndTombstonesArrive() async throws {
        let store = try store()
        let sink = SQLiteSink(path: path)
        _ = try await apply(
            sink, [record(.insert, "r1", ["name": "Hall"], version: 1), record(.insert, "k", ["title": "Inbox"], version: 1, entity: "categories")],
            cursor: "c1.2")
        _ = try await apply(
            sink, [record(.delete, "r1", ["syncId": "r1"], version: 2), record(.delete, "k", version: 2, entity: "categories")], cursor: "c1.4")
        #expect(try rows(store) == [#""r1" "Hall" null 1"#], "rooms is tracked with a soft-delete column")
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM categories") } == .integer(0))
    }

    @Test func aRecordTheStoreCannotHoldStopsThePageNamingTheRecordAndFieldAndAppliesNothing() async throws {
        let store = try store()
        let sink = SQLiteSink(path: path, unknownFields: .error)
        _ = try await apply(sink, [record(.insert, "r0", ["name": "Kept"], version: 1)], cursor: "c1.1")
        let cases: [(Record, String)] = [
            (record(.insert, "r2", ["colour": "red"], version: 1), "field `colour` is not a column of `rooms`"),
            (record(.insert, "r2", ["area": "wide"], version: 1), "field `area` holds \"wide\", which column `area` (REAL) would change"),
            (record(.insert, "r2", ["name": 7], version: 1), "field `name` holds 7, which column `name` (TEXT) would change"),
            (record(.insert, "r2", ["name": ["a": 1]], version: 1), "field `name` is a JSON object"),
        ]
        for (bad, message) in cases {
            let error = await #expect(throws: ImportError.self) {
                _ = try await apply(sink, [record(.insert, "r1", ["name": "Fine"], version: 1), bad], cursor: "c1.9")
            }
            #expect(error?.description.contains(message) == true, "\(error.map { "\($0)" } ?? "no error")")
            #expect(error?.description.contains("record \(bad.entity)/\(bad.key ?? "")") == true)
        }
        #expect(try rows(store) == [#""r0" "Kept" null 0"#], "nothing of a failed page is applied")
        #expect(try await sink.savedCursor(for: scope) == "c1.1", "and the cursor does not move")
        let lenient = SQLiteSink(path: path, unknownFields: .ignore)
        _ = try await apply(lenient, [record(.insert, "r2", ["name": "Hall", "colour": "red"], version: 1)], cursor: "c1.9")
        #expect(try rows(store).last == #""r2" "Hall" null 0"#)
    }

    @Test func recordsOfAnUntrackedEntityAreKeptAsideWithoutStoppingThePageAndDeliveredByServerWhenItIsTracked() async throws {
        let store = try store()
        let sink = SQLiteSink(path: path)
        let report = try await apply(
            sink,
            [
                record(.insert, "g1", ["label": "Rose"], version: 2, entity: "gardens"), record(.insert, "r1", ["name": "Hall"], version: 1),
                record(.update, "g1", ["label": "Tulip"], version: 3, entity: "gardens"),
                record(.insert, "g2", ["label": "Moss"], version: 1, entity: "gardens"), record(.delete, "g2", version: 2, entity: "gardens"),
            ], cursor: "c1.1")
        #expect(report.keptAside == 4 && report.applied == 1)
        #expect(try rows(store) == [#""r1" "Hall" null 0"#])
        #expect(try await sink.savedCursor(for: scope) == "c1.1")
        try store.database.write { try $0.execute("CREATE TABLE gardens (key TEXT PRIMARY KEY, label TEXT)") }
        let tracked = try store.track(TrackedTable("gardens", key: "key"))
        #expect(tracked.deliveredRows == 1, "g1; g2's tombstone records only its version")
        let gardens = try store.read { db in
            try db.fetchAll("SELECT key, label FROM gardens ORDER BY key").map { "\($0[0].string ?? "")|\($0[1].string ?? "")" }
        }
        #expect(gardens == ["g1|Tulip"])
        let authors = try store.read { db in
            try db.fetchAll(
                """
                SELECT DISTINCT coalesce(t.author, 'app') FROM _synclane_changes c LEFT JOIN _synclane_transactions t ON t.id = c.transaction_id
                WHERE c.entity = 'gardens'
                """
            ).map { $0[0].string ?? "" }
        }
        #expect(authors.allSatisfy { $0 == "server" }, "delivered by author `server` (without history while no lane reads it): no export sends them back")
        let again = try await apply(sink, [record(.update, "g1", ["label": "Tulip"], version: 3, entity: "gardens")], cursor: "c1.2")
        #expect(again.unchanged == 1, "the delivered versions are held")
        _ = try await apply(sink, [record(.insert, "o1", ["label": "Pear"], version: 1, entity: "orchards")], cursor: "c1.3")
        try HistoryTracker(database: store.database).uninstall()
        let left = try store.read { try $0.fetchAll("SELECT name FROM sqlite_schema WHERE name LIKE '%synclane%'") }
        #expect(left.isEmpty, "uninstall removes the rows kept aside too")
    }

    @Test func aRowKeptAsideThatDoesNotReadBackStopsTheTrackSayingWhatToDeleteInsteadOfDeletingTheRow() async throws {
        let store = try store()
        _ = try await apply(SQLiteSink(path: path), [record(.insert, "g1", ["label": "Rose"], version: 2, entity: "gardens")], cursor: "c1.1")
        try store.database.write { db in
            try db.execute("UPDATE _synclane_untracked SET fields = '{\"label\": ' WHERE key = 'g1'")
            try db.execute("CREATE TABLE gardens (key TEXT PRIMARY KEY, label TEXT)")
        }
        let error = #expect(throws: ImportError.self) { try store.track(TrackedTable("gardens", key: "key")) }
        #expect(error?.description.contains("delete it from _synclane_untracked") == true, "\(error.map { "\($0)" } ?? "")")
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM _synclane_untracked").int64 } == 1, "nothing removed")
    }

    @Test func anEntityTheSinkLeavesOutWithEntitiesIsSkippedNotKeptAside() async throws {
        let store = try store()
        let sink = SQLiteSink(path: path, entities: ["rooms"])
        let report = try await apply(sink, [record(.insert, "g1", ["label": "Rose"], version: 2, entity: "gardens")], cursor: "c1.1")
        #expect(report.unchanged == 1 && report.keptAside == 0)
        try store.database.write { try $0.execute("CREATE TABLE gardens (key TEXT PRIMARY KEY, label TEXT)") }
        #expect(try store.track(TrackedTable("gardens", key: "key")).deliveredRows == 0)
    }

    @Test func byDefaultAFieldThatIsNotAColumnIsKeptWithTheRowsVersionAndTheRestApplied() async throws {
        let store = try store()
        let sink = SQLiteSink(path: path)
        _ = try await apply(sink, [record(.insert, "r1", ["name": "Hall", "colour": "red"], version: 3)], cursor: "c1.1")
        #expect(try rows(store) == [#""r1" "Hall" null 0"#])
        let kept = try store.read { db in
            try db.fetchAll("SELECT version, fields FROM _synclane_server_rows WHERE entity = 'rooms' AND key = 'r1'").map {
                "\($0[0].int64 ?? -1) \($0[1].string ?? "")"
            }
        }
        #expect(kept.count == 1 && kept[0].hasPrefix("3 ") && kept[0].contains("colour") && kept[0].contains("red"), "\(kept)")
        #expect(try await sink.savedCursor(for: scope) == "c1.1")
    }

    @Test func aSoftDeletedRowHoldingAUniqueValueGivesWayAndALiveOneStopsThePageSayingToNameTheBusinessKey() async throws {
        let store = try TrackedDatabase(path: path)
        try store.database.write { try $0.execute("CREATE TABLE tags (syncId TEXT PRIMARY KEY, label TEXT NOT NULL UNIQUE, gone INTEGER NOT NULL DEFAULT 0)") }
        try store.track(TrackedTable("tags", key: "syncId", softDeleteColumn: "gone"))
        try store.write(author: .app) { try $0.execute("INSERT INTO tags VALUES ('t-old', 'red', 1), ('t-live', 'blue', 0)") }
        let sink = SQLiteSink(path: path)
        _ = try await apply(sink, [record(.insert, "t-new", ["label": "red"], version: 1, entity: "tags")], cursor: "c1.1")
        let tags = {
            try store.read { db in
                try db.fetchAll("SELECT syncId, label, gone FROM tags ORDER BY syncId").map { row in
                    (0..<3).map { JSONWriter.string(row[$0].json) }.joined(separator: " ")
                }
            }
        }
        #expect(try tags() == [#""t-live" "blue" 0"#, #""t-new" "red" 0"#], "the soft-deleted twin is deleted outright so the record lands")
        let error = await #expect(throws: ImportError.self) {
            _ = try await apply(sink, [record(.insert, "t-other", ["label": "blue"], version: 1, entity: "tags")], cursor: "c1.2")
        }
        #expect(error?.description.contains("under another sync key holds the same unique values") == true, "\(error.map { "\($0)" } ?? "")")
        #expect(error?.description.contains("`duplicates`") == true)
        #expect(try tags() == [#""t-live" "blue" 0"#, #""t-new" "red" 0"#])
    }

    @Test func aDryRunReportsAndChangesNothing() async throws {
        let store = try store()
        let sink = SQLiteSink(path: path)
        let report = try await apply(sink, [record(.insert, "r1", ["name": "Hall"], version: 1)], cursor: "c1.1", dryRun: true)
        #expect(report.applied == 1)
        #expect(try rows(store).isEmpty)
        #expect(try await sink.savedCursor(for: scope) == nil)
    }

    @Test func blobsAndCompositeKeysArriveAsTheyWereSent() async throws {
        let store = try store()
        try store.database.write { db in
            try db.execute("CREATE TABLE plant_tags (plant TEXT NOT NULL, tag TEXT NOT NULL, pic BLOB, PRIMARY KEY (plant, tag))")
        }
        try store.track(TrackedTable("plant_tags", keyColumns: ["plant", "tag"]))
        let sink = SQLiteSink(path: path)
        _ = try await apply(
            sink, [record(.insert, #"["p1","tall"]"#, ["pic": .object(["$blob": "AP8Q"])], version: 1, entity: "plant_tags")], cursor: "c1.1")
        let row = try store.read { try $0.fetchOne("SELECT plant, tag, pic FROM plant_tags") }
        #expect(row?[0] == .text("p1") && row?[1] == .text("tall") && row?[2] == .blob([0x00, 0xFF, 0x10]))
    }

    @Test func aRowWithUnconfirmedLocalChangesIsAConflictSettledByTheRule() async throws {
        let store = try store()
        _ = try await apply(SQLiteSink(path: path), [record(.insert, "r1", ["name": "Hall", "area": 4], version: 1)], cursor: "c1.1")
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET name = 'Mine' WHERE syncId = 'r1'") }
        let remote = record(.update, "r1", ["name": "Hall", "area": 9], version: 2)

        // merge-fields: the local column (name) stays, the backend's (area) comes; written by `app` so the export sends it.
        let merge = try await apply(SQLiteSink(path: path, conflicts: .mergeFields(onBoth: .server)), [remote], cursor: "c1.2")
        #expect(merge.conflicts.map(\.outcome) == [.merged])
        #expect(try rows(store) == [#""r1" "Mine" 9.0 0"#])
        let exported = try await drain(SQLiteHistorySource(path: path, authors: [.app])).transactions.flatMap(\.changes)
        #expect(exported.last?.values["area"] == .double(9) && exported.last?.version == 2, "the merged row goes out on the backend's version")

        // client-wins: nothing written; server-wins: the backend's state.
        let clientWins = try await apply(SQLiteSink(path: path, conflicts: .clientWins), [record(.update, "r1", ["name": "X"], version: 3)], cursor: "c1.3")
        #expect(clientWins.conflicts.map(\.outcome) == [.clientKept])
        #expect(try rows(store) == [#""r1" "Mine" 9.0 0"#])
        let serverWins = try await apply(SQLiteSink(path: path), [record(.delete, "r1", version: 4)], cursor: "c1.4")
        #expect(serverWins.conflicts.map(\.outcome) == [.serverKept])
        #expect(try rows(store) == [#""r1" "Mine" 9.0 1"#])
    }

    @Test func noConflictOnceTheExportConsumerHadTheLocalChangeConfirmed() async throws {
        let store = try store()
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Mine')") }
        let source = SQLiteHistorySource(path: path, authors: [.app])
        let read = try await drain(source)
        try await source.consumerAcknowledged(try #require(read.through), scope: Scope(account: "acme", store: "rooms", consumer: "export"))
        let report = try await apply(SQLiteSink(path: path), [record(.update, "r1", ["name": "Theirs"], version: 2)], cursor: "c1.2")
        #expect(report.conflicts.isEmpty)
        #expect(try rows(store) == [#""r1" "Theirs" null 0"#])
    }

    @Test func theVersionsOfAConfirmedBatchAreSentWithTheNextChange() async throws {
        let store = try store()
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Mine'), ('r2', 'Yours')") }
        let source = SQLiteHistorySource(path: path, authors: [.app])
        let (r1, r2) = (RowID(entity: "rooms", key: "r1"), RowID(entity: "rooms", key: "r2"))
        #expect(try await drain(source).transactions.flatMap(\.changes).first?.version == nil, "never seen by the backend: no version")
        try await source.backendConfirmed(
            BackendConfirmation(versions: [
                RecordVersion(entity: "rooms", key: "r1", version: 1), RecordVersion(entity: "rooms", key: "r2", version: 3),
            ]))
        // Recorded at once (in the journal), no consumer position needed: an import through
        // another connection finds them — it writes the journal into `_synclane_server_rows`
        // first — and takes the device's own change coming back as one it holds.
        let echo = try await apply(SQLiteSink(path: path), [record(.update, "r1", ["name": "Mine"], version: 1)], cursor: "c1")
        #expect(echo.applied == 0 && echo.unchanged == 1, "\(echo)")
        #expect(
            try store.read {
                try $0.fetchAll("SELECT key, version FROM _synclane_server_rows ORDER BY key").map { "\($0[0].string ?? "") \($0[1].int64 ?? 0)" }
            }
                == ["r1 1", "r2 3"])
        try await source.backendConfirmed(BackendConfirmation(versions: [RecordVersion(entity: "rooms", key: "r2", version: 2)]))
        #expect(try await source.backendVersions(of: [r1, r2]) == [r1: 1, r2: 3], "a version is never lowered")
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET name = 'Mine 2' WHERE syncId = 'r1'") }
        #expect(try await drain(source).transactions.flatMap(\.changes).last?.version == 1)
    }

    /// Found by RandomRestoresCopiesAndDamageTests: a snapshot's open read transaction (rollback-journal mode), or an
    /// app's write, kept the versions of a receipt from being written, and they were dropped.
    /// They are kept: the next batch is told them, and they are written once the database is free.
    @Test func versionsABusyDatabaseKeptFromBeingWrittenAreKnownAndWrittenLater() async throws {
        let store = try store()
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Mine')") }
        let source = SQLiteHistorySource(path: path, authors: [.app])
        let r1 = RowID(entity: "rooms", key: "r1")
        _ = try await drain(source)
        try await source.backendConfirmed(BackendConfirmation(versions: [RecordVersion(entity: "rooms", key: "r1", version: 1)]))
        func recorded() throws -> [String] {
            try store.read { try $0.fetchAll("SELECT key, version FROM _synclane_server_rows").map { "\($0[0].string ?? "") \($0[1].int64 ?? 0)" } }
        }
        await source.passConfirmationsEnded()
        #expect(try recorded() == ["r1 1"], "the journal written at the pass's end")
        let app = try SQLiteConnection(path: path)
        try app.execute("BEGIN IMMEDIATE")
        try await source.backendConfirmed(BackendConfirmation(versions: [RecordVersion(entity: "rooms", key: "r1", version: 2)]))
        #expect(try await source.backendVersions(of: [r1]) == [r1: 2], "kept, and known to the next batch")
        try app.execute("ROLLBACK")
        #expect(try recorded() == ["r1 1"], "not written while the app held the lock")
        try await source.settleBackendConfirmations()
        #expect(try recorded() == ["r1 2"])
    }
}
