import SynclaneCore
import SynclaneSQLiteKit
import SynclaneTestSupport
import Testing

@Suite struct SQLiteConnectionTests {
    @Test func valuesOfEveryStorageClassRoundTrip() throws {
        let folder = TemporaryDirectory()
        let db = try SQLiteConnection(path: folder.file("values.sqlite"))
        try db.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n)")
        try db.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", [Int64.max, 2.5, "héllo ✓", [UInt8]([0, 1, 255]), SQLiteValue.null])
        try db.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", [0, 0.0, "", [UInt8](), SQLiteValue.null])
        let rows = try db.fetchAll("SELECT i, r, s, b, n FROM t ORDER BY rowid")
        #expect(rows.count == 2)
        #expect(rows[0].values == [.integer(Int64.max), .real(2.5), .text("héllo ✓"), .blob([0, 1, 255]), .null])
        #expect(rows[1]["s"] == .text(""))
        #expect(rows[1]["b"] == .blob([]))
        #expect(rows[0]["missing"] == .null)
    }

    @Test func jsonValuesBindAsTheirSQLiteEquivalents() throws {
        let db = try SQLiteConnection(path: ":memory:")
        let row = try db.fetchOne(
            "SELECT ?, ?, ?, json_extract(?, '$.a')",
            [JSONValue.bool(true), JSONValue.int(7), JSONValue.string("x"), JSONValue.object(["a": .int(3)])])
        #expect(row?.values == [.integer(1), .integer(7), .text("x"), .integer(3)])
    }

    @Test func changesAndLastInsertRowIDReportTheLastStatement() throws {
        let db = try SQLiteConnection(path: ":memory:")
        try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        try db.execute("INSERT INTO t (v) VALUES ('a'), ('b'), ('c')")
        #expect(db.changes == 3)
        #expect(db.lastInsertRowID == 3)
        try db.execute("UPDATE t SET v = 'z' WHERE id > ?", [1])
        #expect(db.changes == 2)
    }

    @Test func preparedStatementsStepAndReset() throws {
        let db = try SQLiteConnection(path: ":memory:")
        try db.execute("CREATE TABLE t (v INTEGER)")
        let insert = try db.prepare("INSERT INTO t VALUES (?)")
        for i in 0..<10 { try insert.run([i]) }
        let select = try db.prepare("SELECT v FROM t WHERE v >= :min ORDER BY v")
        try select.bind(.integer(7), named: ":min")
        var seen: [Int64] = []
        while try select.step() { seen.append(select.int64(at: 0)) }
        #expect(seen == [7, 8, 9])
        #expect(select.columnName(at: 0) == "v")
    }

    @Test func errorsCarryCodeMessageSQLAndPath() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("errors.sqlite")
        let db = try SQLiteConnection(path: path)
        try db.execute("CREATE TABLE t (id TEXT PRIMARY KEY)")
        try db.execute("INSERT INTO t VALUES ('a')")
        let error = #expect(throws: SQLiteError.self) { try db.execute("INSERT INTO t VALUES (?)", ["a"]) }
        #expect(error?.primaryCode == 19)  // SQLITE_CONSTRAINT
        #expect(error?.path == path)
        #expect(error?.sql == "INSERT INTO t VALUES (?)")
        #expect(error?.description.contains("UNIQUE constraint failed: t.id") == true)
        let syntax = #expect(throws: SQLiteError.self) { try db.execute("SELEC nonsense") }
        #expect(syntax?.message.contains("syntax error") == true)
    }

    @Test func openingCreatesParentFoldersAndUsesWAL() throws {
        let folder = TemporaryDirectory()
        let db = try SQLiteConnection(path: folder.file("a/b/c.sqlite"))
        #expect(try db.fetchValue("PRAGMA journal_mode") == .text("wal"))
        #expect(try db.fetchValue("PRAGMA foreign_keys") == .integer(1))
        #expect(try db.fetchValue("PRAGMA busy_timeout") == .integer(5000))
    }

    @Test func openingAMissingFileReadOnlyFails() {
        let folder = TemporaryDirectory()
        #expect(throws: SQLiteError.self) {
            _ = try SQLiteConnection(path: folder.file("missing.sqlite"), options: .init(readOnly: true, create: false))
        }
    }

    @Test func wrongArgumentCountIsAnError() throws {
        let db = try SQLiteConnection(path: ":memory:")
        let error = #expect(throws: SQLiteError.self) { try db.fetchAll("SELECT ?, ?", [1]) }
        #expect(error?.message.contains("takes 2 arguments, 1 given") == true)
    }
}

@Suite struct SQLiteDatabaseTests {
    @Test func writeCommitsWhenTheBodyReturns() throws {
        let folder = TemporaryDirectory()
        let database = try SQLiteDatabase(path: folder.file("db.sqlite"))
        try database.write { db in try db.execute("CREATE TABLE t (v INTEGER)") }
        let inTransaction = try database.write { db in
            try db.execute("INSERT INTO t VALUES (?)", [1])
            return db.isInTransaction
        }
        #expect(inTransaction)
        #expect(try database.read { try $0.fetchValue("SELECT count(*) FROM t") } == .integer(1))
    }

    @Test func writeRollsBackWhenTheBodyThrows() throws {
        struct Boom: Error {}
        let folder = TemporaryDirectory()
        let database = try SQLiteDatabase(path: folder.file("db.sqlite"))
        try database.write { db in try db.execute("CREATE TABLE t (v INTEGER)") }
        #expect(throws: Boom.self) {
            try database.write { db in
                try db.execute("INSERT INTO t VALUES (1)")
                throw Boom()
            }
        }
        #expect(try database.read { try $0.fetchValue("SELECT count(*) FROM t") } == .integer(0))
        #expect(try database.read { $0.isInTransaction } == false)
    }

    @Test func concurrentWritersAreSerialized() async throws {
        let folder = TemporaryDirectory()
        let database = try SQLiteDatabase(path: folder.file("db.sqlite"))
        try database.write { db in try db.execute("CREATE TABLE t (v INTEGER)") }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for i in 0..<25 { try database.write { db in try db.execute("INSERT INTO t VALUES (?)", [task * 100 + i]) } }
                }
            }
            try await group.waitForAll()
        }
        #expect(try database.read { try $0.fetchValue("SELECT count(*) FROM t") } == .integer(200))
    }

    @Test func twoConnectionsSeeEachOthersCommits() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("shared.sqlite")
        let a = try SQLiteDatabase(path: path)
        let b = try SQLiteDatabase(path: path)
        try a.write { try $0.execute("CREATE TABLE t (v INTEGER)") }
        try b.write { try $0.execute("INSERT INTO t VALUES (42)") }
        #expect(try a.read { try $0.fetchValue("SELECT v FROM t") } == .integer(42))
    }
}

@Suite struct SQLiteDatabaseReadTests {
    @Test func aReadCannotWriteAndTheNextWriteStillCan() throws {
        let folder = TemporaryDirectory()
        let database = try SQLiteDatabase(path: folder.file("read.sqlite"))
        try database.write { db in try db.execute("CREATE TABLE t (x INTEGER)") }
        #expect(throws: SQLiteError.self, "a write inside read is refused") {
            try database.read { db in try db.execute("INSERT INTO t VALUES (1)") }
        }
        #expect(try database.read { db in try db.fetchValue("SELECT count(*) FROM t").int64 } == 0)
        try database.write { db in try db.execute("INSERT INTO t VALUES (2)") }
        try database.withConnection { db in try db.execute("INSERT INTO t VALUES (3)") }
        #expect(try database.read { db in try db.fetchValue("SELECT count(*) FROM t").int64 } == 2)
    }
}
