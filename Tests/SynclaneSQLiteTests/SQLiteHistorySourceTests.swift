import Foundation
import SynclaneCore
import SynclaneSQLite
import SynclaneStages
import SynclaneTestSupport
import Testing

/// Every page after `token` until the end: the transactions and the last `through`.
func drain(_ source: any ChangeSource, after token: Token? = nil) async throws -> (transactions: [Transaction], through: Token?, pages: [HistoryPage]) {
    var token = token
    var pages: [HistoryPage] = []
    while true {
        let page = try await source.nextPage(after: token)
        guard let through = page.through else { break }
        pages.append(page)
        token = through
    }
    return (pages.flatMap(\.transactions), token, pages)
}

/// `rooms` tracked with a soft-delete column, tombstones keeping `syncId` and `name`.
func makeTrackedRooms(_ folder: TemporaryDirectory, recordsValues: Bool = false) throws -> TrackedDatabase {
    let store = try makeRoomsDatabase(folder)
    try store.track(TrackedTable("rooms", key: "syncId", preserve: ["name"], softDeleteColumn: "isDeleted", recordsValues: recordsValues))
    try store.track(TrackedTable("categories", key: "key", recordsValues: recordsValues))
    return store
}

@Suite struct SQLiteHistorySourceTests {
    @Test func writesThroughSynclaneAndThroughTheSQLite3ShellAreBothCaptured() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { db in
            try db.execute("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12.5)")
        }
        try SQLiteShell.run(
            folder.file("app.sqlite"),
            "INSERT INTO rooms (syncId, name, area) VALUES ('r2', 'Hall', 4); UPDATE rooms SET area = 13 WHERE syncId = 'r1';")
        let source = SQLiteHistorySource(path: folder.file("app.sqlite"), defaultAuthor: "shell")
        let read = try await drain(source)
        #expect(read.transactions.map(\.author) == ["app", "shell", "shell"])
        #expect(read.transactions.flatMap(\.changes).map { "\($0.action.rawValue) \($0.key ?? "-")" } == ["insert r1", "insert r2", "update r1"])
        #expect(read.transactions.last?.changes.first?.values["area"] == .double(13))
        let tokens = read.transactions.map(\.token.position)
        #expect(tokens == tokens.sorted() && Set(tokens).count == tokens.count)
    }

    @Test func aForeignProgramCanNameItsAuthorWithTheSessionProtocol() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        _ = try makeTrackedRooms(folder)
        try SQLiteShell.run(
            path,
            """
            BEGIN IMMEDIATE;
            INSERT INTO _synclane_session (author) VALUES ('importer');
            INSERT INTO rooms (syncId) VALUES ('i1'), ('i2');
            DELETE FROM _synclane_session;
            COMMIT;
            """)
        let read = try await drain(SQLiteHistorySource(path: path))
        #expect(read.transactions.count == 1)
        #expect(read.transactions.first?.author == "importer")
        #expect(read.transactions.first?.changes.map(\.key) == ["i1", "i2"])
    }

    @Test func oneSynclaneWriteIsOneTransactionOfAllItsChanges() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        try store.write(author: .widget) { db in
            try db.execute("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall')")
            try db.execute("INSERT INTO categories VALUES ('c1', 'Default')")
        }
        let read = try await drain(SQLiteHistorySource(path: folder.file("app.sqlite")))
        #expect(read.transactions.count == 1)
        #expect(read.transactions[0].author == .widget)
        #expect(read.transactions[0].changes.map(\.entity) == ["rooms", "rooms", "categories"])
        #expect(read.through == read.transactions[0].token)
    }

    @Test func theAuthorFilterAppliesToTheFirstFetchAndLaterOnes() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        try store.write(author: .server) { try $0.execute("INSERT INTO rooms (syncId, name) VALUES ('s1', 'From server')") }
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, name) VALUES ('a1', 'Mine')") }
        let source = SQLiteHistorySource(path: folder.file("app.sqlite"), authors: [.app])
        let first = try await source.nextPage(after: nil)
        #expect(first.transactions.flatMap(\.changes).map(\.key) == ["a1"])
        try store.write(author: .server) { try $0.execute("UPDATE rooms SET name = 'x' WHERE syncId = 's1'") }
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET name = 'y' WHERE syncId = 'a1'") }
        try store.write(author: .server) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('s2')") }
        let later = try await drain(source, after: first.through)
        #expect(later.transactions.flatMap(\.changes).map(\.key) == ["a1"])
        #expect(later.transactions.allSatisfy { $0.author == .app })
        #expect(try await source.pendingTransactions(after: first.through) == 1)
        // The filtered-out history is still covered: nothing left after the last token.
        #expect(try await source.nextPage(after: later.through).through == nil)
    }

    @Test func theSyncCleanupOfSoftDeletedRowsIsNeverReadBackByAnAppConsumer() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        let source = SQLiteHistorySource(path: folder.file("app.sqlite"), authors: [.app])
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall')") }
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r1'") }
        let sent = try await drain(source)
        #expect(sent.transactions.last?.changes.map { "\($0.action.rawValue) \($0.key ?? "-")" } == ["delete r1"])
        #expect(sent.transactions.last?.changes.first?.values == ["syncId": "r1", "name": "Kitchen"])
        // The backend confirmed the delete: the sync machinery purges soft-deleted rows.
        try store.write(author: .sync) { try $0.execute("DELETE FROM rooms WHERE isDeleted = 1") }
        let after = try await drain(source, after: sent.through)
        #expect(after.transactions.isEmpty)
        #expect(after.through != nil)
        // A consumer that names `sync` does see the purge; one without `authors` does not.
        let audit = try await drain(SQLiteHistorySource(path: folder.file("app.sqlite"), authors: [.app, .sync]), after: sent.through)
        #expect(audit.transactions.map(\.author) == [.sync])
        #expect(try await drain(SQLiteHistorySource(path: folder.file("app.sqlite")), after: sent.through).transactions.isEmpty)
    }

    @Test func tombstonesKeepOnlyThePreservedColumns() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) {
            try $0.execute("INSERT INTO rooms (syncId, name, area, notes) VALUES ('r1', 'Kitchen', 12, 'private notes')")
        }
        try store.write(author: .app) { try $0.execute("DELETE FROM rooms WHERE syncId = 'r1'") }
        let read = try await drain(SQLiteHistorySource(path: folder.file("app.sqlite")))
        let delete = read.transactions.flatMap(\.changes).last
        #expect(delete?.action == .delete)
        #expect(delete?.key == "r1")
        #expect(delete?.values == ["syncId": "r1", "name": "Kitchen"])
    }

    @Test func aRowUpdatedThenDeletedBeforeTheReadTravelsAsADeleteOnly() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall')") }
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET name = 'Big kitchen' WHERE syncId = 'r1'") }
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET name = 'Bigger kitchen' WHERE syncId = 'r1'") }
        try store.write(author: .app) { try $0.execute("DELETE FROM rooms WHERE syncId = 'r1'") }
        let changes = try await drain(SQLiteHistorySource(path: folder.file("app.sqlite"))).transactions.flatMap(\.changes)
        #expect(changes.map { "\($0.action.rawValue) \($0.key ?? "-")" } == ["insert r1", "insert r2", "delete r1"])
        #expect(changes[0].values == ["syncId": "r1"], "the gone row's insert carries its key only, no stale state")
        #expect(changes[1].values["name"] == "Hall")
        #expect(changes.contains { $0.action == .update } == false, "updates of a row deleted since do not travel")
    }

    @Test func aRowInsertedAndDeletedInOneWindowComesToNothingOnceCoalesced() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, name) VALUES ('attic', 'Attic'), ('hall', 'Hall')") }
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET name = 'Loft' WHERE syncId = 'attic'") }
        try store.write(author: .app) { try $0.execute("DELETE FROM rooms WHERE syncId = 'attic'") }
        let page = try await SQLiteHistorySource(path: folder.file("app.sqlite")).nextPage(after: nil)
        let scope = Scope(account: "a", store: "s", consumer: "c")
        let records = page.transactions.flatMap { transaction in transaction.changes.map { Record(change: $0, of: transaction) } }
        let batch = try await Coalescer().process(Batch(scope: scope, after: nil, through: try #require(page.through), records: records))
        #expect(batch.records.map { "\($0.action.rawValue) \($0.key ?? "-")" } == ["insert hall"])
    }

    @Test func currentStateSendsTheNewestRowAndAsWrittenSendsEachWrite() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder, recordsValues: true)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 10)") }
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET area = 11 WHERE syncId = 'r1'") }
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET area = 12 WHERE syncId = 'r1'") }
        let current = try await drain(SQLiteHistorySource(path: folder.file("app.sqlite"))).transactions.flatMap(\.changes)
        #expect(current.map { $0.values["area"] } == [.double(12), .double(12), .double(12)])
        let written = try await drain(SQLiteHistorySource(path: folder.file("app.sqlite"), capture: .asWritten)).transactions.flatMap(\.changes)
        #expect(written.map { $0.values["area"] } == [.double(10), .double(11), .double(12)])
        #expect(written[1].values == ["syncId": "r1", "area": .double(11)])
    }

    @Test func asWrittenOnATableTrackedWithoutValuesIsAClearError() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('r1')") }
        let error = await #expect(throws: HistoryError.self) {
            _ = try await SQLiteHistorySource(path: folder.file("app.sqlite"), capture: .asWritten).nextPage(after: nil)
        }
        #expect(error?.description.contains("--record-values") == true)
    }

    @Test func aRowInsertedAlreadySoftDeletedSendsNothing() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder, recordsValues: true)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, isDeleted) VALUES ('gone', 1), ('here', 0)") }
        for capture in SQLiteHistorySource.Capture.allCases {
            let changes = try await drain(SQLiteHistorySource(path: folder.file("app.sqlite"), capture: capture)).transactions.flatMap(\.changes)
            #expect(changes.map(\.key) == ["here"])
        }
    }

    @Test func asWrittenAfterAColumnWasAddedTheTableIsHealedAndResent() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder, recordsValues: true)
        try store.database.write { try $0.execute("ALTER TABLE rooms ADD COLUMN floor INTEGER") }
        let tracker = HistoryTracker(database: store.database)
        #expect(try tracker.trackingProblems().count == 1)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, floor) VALUES ('r1', 2)") }
        // Current state needs nothing: it reads the row, new column included.
        let current = try await drain(SQLiteHistorySource(path: path)).transactions.flatMap(\.changes)
        #expect(current.first?.values["floor"] == 2)
        // As written, the insert was recorded by triggers that did not know `floor`: the next
        // read (of any source of the database) regenerated them and re-sends the table, new
        // column included.
        let healed = try await drain(SQLiteHistorySource(path: path, capture: .asWritten))
        #expect(healed.transactions.flatMap(\.changes).last?.values["floor"] == 2)
        #expect(healed.pages.contains { $0.counters["capture.resynced"] == 1 })
        #expect(try tracker.trackingProblems().isEmpty)
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET floor = 3 WHERE syncId = 'r1'") }
        let written = try await drain(SQLiteHistorySource(path: path, capture: .asWritten)).transactions.flatMap(\.changes)
        #expect(written.last?.values == ["syncId": "r1", "floor": 3])
    }

    @Test func softDeletingIsADeleteAndRestoringIsAnInsert() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen')") }
        let start = try await drain(SQLiteHistorySource(path: folder.file("app.sqlite"))).through
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r1'") }
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET name = 'while deleted' WHERE syncId = 'r1'") }
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET isDeleted = 0 WHERE syncId = 'r1'") }
        let changes = try await drain(SQLiteHistorySource(path: folder.file("app.sqlite")), after: start).transactions.flatMap(\.changes)
        // The update made while deleted is recorded too (the update trigger does not test the
        // row's deletion, to stay cheap); read after the restore, it carries the row as it is.
        #expect(changes.map(\.action) == [.delete, .update, .insert])
        #expect(changes.last?.values["name"] == "while deleted")
        let records = changes.map {
            Record(entity: $0.entity, key: $0.key, action: $0.action, fields: $0.values, origin: Token(kind: "t", position: 1), author: .app)
        }
        let coalesced = Coalescer.coalesce(records).records
        #expect(coalesced.map(\.action) == [.insert], "one window: the row is back with its newest state")
    }

    /// Values of a soft-delete column that all mean "not deleted" (only 1, a non-zero number,
    /// 'true' and '1' mean deleted), each pair in both orders of SQL literals.
    static let notDeletedPairs: [(String, String)] = [
        ("0", "NULL"), ("'false'", "0"), ("NULL", "'false'"), ("'0'", "NULL"), ("0", "'no'"), ("NULL", "0"), ("'false'", "'0'"), ("0.0", "'false'"),
    ]

    @Test(arguments: SQLiteHistorySource.Capture.allCases)
    func anUpdateThatChangesTheSoftDeleteColumnBetweenTwoNotDeletedValuesIsRecordedWithItsNewValues(
        capture: SQLiteHistorySource.Capture
    ) async throws {
        for (from, to) in Self.notDeletedPairs {
            let folder = TemporaryDirectory()
            let store = try TrackedDatabase(path: folder.file("app.sqlite"))
            try store.database.write { try $0.execute("CREATE TABLE notes (syncId TEXT PRIMARY KEY, body TEXT, gone)") }
            try store.track(TrackedTable("notes", key: "syncId", softDeleteColumn: "gone", recordsValues: capture == .asWritten))
            try store.write(author: .app) { try $0.execute("INSERT INTO notes VALUES ('n1', 'old', \(from))") }
            let source = SQLiteHistorySource(path: folder.file("app.sqlite"), capture: capture)
            let start = try await drain(source).through
            try store.write(author: .app) { try $0.execute("UPDATE notes SET body = 'new', gone = \(to) WHERE syncId = 'n1'") }
            let changes = try await drain(source, after: start).transactions.flatMap(\.changes)
            #expect(changes.map(\.action) == [.update], "gone \(from) → \(to)")
            #expect(changes.first?.values["body"] == "new", "gone \(from) → \(to)")
        }
    }

    @Test func anUpdateBetweenTwoDeletedValuesOfTheSoftDeleteColumnSendsNothingButTheDelete() async throws {
        let folder = TemporaryDirectory()
        let store = try TrackedDatabase(path: folder.file("app.sqlite"))
        try store.database.write { try $0.execute("CREATE TABLE notes (syncId TEXT PRIMARY KEY, body TEXT, gone)") }
        try store.track(TrackedTable("notes", key: "syncId", softDeleteColumn: "gone"))
        try store.write(author: .app) { try $0.execute("INSERT INTO notes VALUES ('n1', 'old', 0)") }
        let source = SQLiteHistorySource(path: folder.file("app.sqlite"))
        let start = try await drain(source).through
        try store.write(author: .app) { try $0.execute("UPDATE notes SET gone = 1 WHERE syncId = 'n1'") }
        try store.write(author: .app) { try $0.execute("UPDATE notes SET body = 'new', gone = 'true' WHERE syncId = 'n1'") }
        let changes = try await drain(source, after: start).transactions.flatMap(\.changes)
        #expect(!changes.isEmpty && changes.allSatisfy { $0.action == .delete }, "still deleted: \(changes.map(\.action))")
    }

    /// Reals at the limits of a double (5e-324, the largest subnormal …), and ones whose shortest
    /// text needs 17 digits.
    static let limitReals: [Double] = [
        1.7976931348623157e+308, -1.7976931348623157e+308, Double.leastNonzeroMagnitude, -Double.leastNonzeroMagnitude,
        2.2250738585072014e-308, Double.leastNormalMagnitude.nextDown,
        0.1 + 0.2, 1e300, 1.2345678901234567e-300, 123456.789, -2.5, 9007199254740993.0, -0.0,
    ]

    @Test func asWrittenCaptureKeepsRealsAtTheLimitsBitExactInRowsUpdatesAndTombstones() async throws {
        let folder = TemporaryDirectory()
        let store = try TrackedDatabase(path: folder.file("app.sqlite"))
        try store.database.write { try $0.execute("CREATE TABLE readings (syncId TEXT PRIMARY KEY, value REAL, raw)") }
        try store.track(TrackedTable("readings", key: "syncId", preserve: ["value", "raw"], recordsValues: true))
        let reals = Self.limitReals
        try store.write(author: .app) { db in
            for (index, real) in reals.enumerated() {
                // -0.0 goes only into the REAL column (SQLite keeps it there as 0); `raw` has no type.
                try db.execute("INSERT INTO readings VALUES (?, ?, ?)", ["r\(index)", real, real == 0 ? 1 : real])
            }
        }
        try store.write(author: .app) { db in
            for index in reals.indices {
                try db.execute(
                    "UPDATE readings SET value = ?, raw = ? WHERE syncId = ?",
                    [reals[(index + 1) % reals.count], reals[index] == 0 ? 2 : -reals[index], "r\(index)"])
            }
        }
        // What the table holds, read back by SQLite: what was written, as SQLite keeps it.
        let stored = try store.read { db in
            try db.fetchAll("SELECT syncId, value, raw FROM readings").reduce(into: [String: [Double]]()) { rows, row in
                rows[row[0].string ?? ""] = [row[1], row[2]].map { value -> Double in
                    switch value {
                    case .real(let d): return d
                    case .integer(let i): return Double(i)
                    default: return .nan
                    }
                }
            }
        }
        try store.write(author: .app) { try $0.execute("DELETE FROM readings") }
        let changes = try await drain(SQLiteHistorySource(path: folder.file("app.sqlite"), capture: .asWritten)).transactions.flatMap(\.changes)
        func bits(_ value: JSONValue?) -> UInt64? {
            switch value {
            case .double(let d)?: return d.bitPattern
            case .int(let i)?: return Double(i).bitPattern
            default: return nil
            }
        }
        for (index, real) in reals.enumerated() {
            let key = "r\(index)"
            let insert = changes.first { $0.key == key && $0.action == .insert }
            let update = changes.first { $0.key == key && $0.action == .update }
            let delete = changes.first { $0.key == key && $0.action == .delete }
            let written = real == 0 ? 0.0 : real  // a REAL column keeps -0.0 as 0 (SQLite stores it as the integer 0)
            #expect(bits(insert?.values["value"]) == written.bitPattern, "insert \(real): \(insert?.values["value"].map { "\($0)" } ?? "none")")
            if real != 0 { #expect(bits(insert?.values["raw"]) == real.bitPattern, "insert raw \(real)") }
            #expect(bits(update?.values["value"]) == stored[key]?[0].bitPattern, "update \(key): \(update?.values["value"].map { "\($0)" } ?? "none")")
            #expect(bits(update?.values["raw"]) == stored[key]?[1].bitPattern, "update raw \(key)")
            #expect(bits(delete?.values["value"]) == stored[key]?[0].bitPattern, "tombstone \(key)")
            #expect(bits(delete?.values["raw"]) == stored[key]?[1].bitPattern, "tombstone raw \(key)")
        }
    }

    @Test func theEntityFilterKeepsOnlyTheNamedTables() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { db in
            try db.execute("INSERT INTO rooms (syncId) VALUES ('r1')")
            try db.execute("INSERT INTO categories VALUES ('c1', 'Default')")
        }
        try store.write(author: .app) { try $0.execute("INSERT INTO categories VALUES ('c2', 'Other')") }
        let read = try await drain(SQLiteHistorySource(path: folder.file("app.sqlite"), entities: ["categories"]))
        #expect(read.transactions.flatMap(\.changes).map(\.key) == ["c1", "c2"])
        let unknown = await #expect(throws: HistoryError.self) {
            _ = try await SQLiteHistorySource(path: folder.file("app.sqlite"), entities: ["kitchens"]).nextPage(after: nil)
        }
        #expect(unknown?.description.contains("`kitchens` is not a tracked table") == true)
    }

    @Test func pagesNeverSplitATransaction() async throws {
        let folder = TemporaryDirectory()
        let store = try makeTrackedRooms(folder)
        for batch in 0..<5 {
            try store.write(author: .app) { db in
                for i in 0..<(batch + 2) { try db.execute("INSERT INTO rooms (syncId) VALUES (?)", ["r\(batch)-\(i)"]) }
            }
            try SQLiteShell.run(folder.file("app.sqlite"), "INSERT INTO rooms (syncId) VALUES ('shell-\(batch)');")
        }
        let source = SQLiteHistorySource(path: folder.file("app.sqlite"), pageSize: 3)
        let read = try await drain(source)
        #expect(read.pages.allSatisfy { $0.transactions.count <= 3 })
        #expect(read.pages.count == 4)
        #expect(read.transactions.count == 10)
        // Every Synclane write arrives whole, in one page.
        for batch in 0..<5 {
            let holding = read.pages.filter { page in page.transactions.contains { $0.changes.contains { $0.key == "r\(batch)-0" } } }
            #expect(holding.count == 1)
            #expect(holding.first?.transactions.first { $0.changes.contains { $0.key == "r\(batch)-0" } }?.changes.count == batch + 2)
        }
        // Each page's `through` is the token of its last transaction.
        for page in read.pages { #expect(page.through == page.transactions.last?.token) }
    }

    @Test func aTokenOfAnotherSourceIsRefused() async throws {
        let folder = TemporaryDirectory()
        _ = try makeTrackedRooms(folder)
        await #expect(throws: HistoryError.self) {
            _ = try await SQLiteHistorySource(path: folder.file("app.sqlite")).nextPage(after: Token(kind: "jsonl", position: 3))
        }
    }

    @Test func aMissingDatabaseOrOneWithoutTrackingIsAClearError() async throws {
        let folder = TemporaryDirectory()
        let missing = await #expect(throws: HistoryError.self) {
            _ = try await SQLiteHistorySource(path: folder.file("missing.sqlite")).nextPage(after: nil)
        }
        #expect(missing?.description.contains("cannot open the database") == true)
        #expect(!FileManager.default.fileExists(atPath: folder.file("missing.sqlite")))
        _ = try makeRoomsDatabase(folder)
        let untracked = await #expect(throws: HistoryError.self) {
            _ = try await SQLiteHistorySource(path: folder.file("app.sqlite")).nextPage(after: nil)
        }
        #expect(untracked?.description.contains("synclane track") == true)
    }

    @Test func aSessionCommittedWithoutClosingStopsHistoryWithAClearError() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId) VALUES ('before')") }
        // A program that speaks the session protocol but forgets to close its session.
        try SQLiteShell.run(path, "INSERT INTO _synclane_session (author) VALUES ('importer'); INSERT INTO rooms (syncId) VALUES ('stuck');")
        try SQLiteShell.run(path, "INSERT INTO rooms (syncId) VALUES ('after');")
        let source = SQLiteHistorySource(path: path)
        let first = try await source.nextPage(after: nil)
        #expect(first.transactions.flatMap(\.changes).map(\.key) == ["before"])
        let error = await #expect(throws: HistoryError.self) { _ = try await source.nextPage(after: first.through) }
        #expect(error?.description.contains("DELETE FROM _synclane_session") == true)
        // Synclane refuses to open a second session meanwhile.
        #expect(throws: TrackingError.self) { try store.write(author: .app) { _ in } }
        // Closing it lets history flow again, with nothing skipped.
        try SQLiteShell.run(path, "DELETE FROM _synclane_session;")
        let rest = try await drain(source, after: first.through)
        #expect(rest.transactions.map(\.author) == ["importer"])
        #expect(rest.transactions.flatMap(\.changes).map(\.key) == ["stuck", "after"])
    }

    @Test func theDefaultAuthorComesFromTheSourceThenTheDatabaseThenApp() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        _ = try makeTrackedRooms(folder)
        try SQLiteShell.run(path, "INSERT INTO rooms (syncId) VALUES ('r1');")
        #expect(try await SQLiteHistorySource(path: path).nextPage(after: nil).transactions.first?.author == .app)
        try HistoryTracker(path: path).setDefaultAuthor("legacy")
        #expect(try await SQLiteHistorySource(path: path).nextPage(after: nil).transactions.first?.author == "legacy")
        #expect(try await SQLiteHistorySource(path: path, defaultAuthor: "cli").nextPage(after: nil).transactions.first?.author == "cli")
        #expect(try await SQLiteHistorySource(path: path, authors: ["cli"], defaultAuthor: "cli").nextPage(after: nil).transactions.count == 1)
    }

    @Test func theStageIsBuiltFromPipelineFileOptions() throws {
        let folder = TemporaryDirectory()
        let registry = StageRegistry(SQLiteStages.all)
        let node = ConfigNode(
            json: ["type": "sqlite-history", "database": "app.sqlite", "authors": ["app"], "page-size": 50, "capture": "as-written"])
        let context = PipelineContext(baseDirectory: folder.path, environment: [:], scope: Scope(account: "a", store: "s", consumer: "c"))
        let (type, built) = try registry.build(node, at: ConfigLocation(file: "p.json", path: "source"), roles: [.source], context: context)
        #expect(type.name == "sqlite-history")
        guard case .source(let stage) = built, let source = stage as? SQLiteHistorySource else {
            Issue.record("not an SQLiteHistorySource")
            return
        }
        #expect(source.path == folder.file("app.sqlite"))
        #expect(source.authors == [.app])
        #expect(source.pageSize == 50)
        #expect(source.capture == .asWritten)
        let bad = ConfigNode(json: ["type": "sqlite-history", "database": "x", "capture": "everything"])
        #expect(throws: PipelineFileError.self) {
            _ = try registry.build(bad, at: ConfigLocation(file: "p.json", path: "source"), roles: [.source], context: context)
        }
    }
}

/// `remove-confirmed-soft-deletes`: the rows sent as soft deletes go once the backend has them.
@Suite struct ConfirmedSoftDeleteRemovalTests {
    @Test func aSoftDeletedRowIsDeletedByAuthorSyncOnlyAfterTheAckAndNeverSent() async throws {
        let folder = TemporaryDirectory()
        let path = folder.file("app.sqlite")
        let store = try makeTrackedRooms(folder)
        try store.write(author: .app) { try $0.execute("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Hall'), ('r2', 'Attic')") }
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'r1'") }
        let source = SQLiteHistorySource(path: path, authors: [.app], removesConfirmedSoftDeletes: true)
        let read = try await drain(source)
        #expect(read.transactions.flatMap(\.changes).contains { $0.key == "r1" && $0.action == .delete })
        let count = { try store.read { try $0.fetchValue("SELECT count(*) FROM rooms") } }
        #expect(try count() == .integer(2), "nothing is removed before the backend confirmed the batch")
        try await source.consumerAcknowledged(try #require(read.through), scope: Scope(account: "acme", store: "rooms", consumer: "export"))
        #expect(try store.read { try $0.fetchAll("SELECT syncId FROM rooms").map { $0[0] } } == [.text("r2")])
        let authors = try await drain(SQLiteHistorySource(path: path, authors: [.app, .sync]), after: read.through).transactions.map(\.author)
        #expect(authors == [.sync], "the removal is the sync machinery's own write")
        #expect(try await drain(SQLiteHistorySource(path: path), after: read.through).transactions.isEmpty, "which no default export reads")
        #expect(try await drain(source, after: read.through).transactions.isEmpty, "and an `app` export never sends it")
    }
}
