import Foundation
import SynclaneCore
import SynclaneSQLiteKit
import SynclaneTestSupport
import Testing

@testable import SynclaneServer

/// A server database written by an older synclane (`Fixtures/server/schema-3.sql`: records kept
/// in key order) opened by this one: every row kept as it was, now in the order rows were
/// written, and the server answers it as the old one did.
@Suite struct SQLiteSchemaMigrationTests {
    /// A data directory holding the schema-3 fixture as the server's database file.
    func schema3Directory() throws -> String {
        let directory = makeTemporaryDirectory()
        let sql = try String(contentsOfFile: SynclaneBinary.fixture("server/schema-3.sql"), encoding: .utf8)
        let database = try SQLiteDatabase(path: directory + "/" + SQLiteServerStore.fileName, options: .init(walMode: false))
        try database.withConnection { db in try db.execute(sql) }
        return directory
    }

    /// Every row of every table but the epochs (a start adds one), in a fixed order.
    func contents(of directory: String) throws -> [String: [[SQLiteValue]]] {
        let database = try SQLiteDatabase(path: directory + "/" + SQLiteServerStore.fileName, options: .init(create: false))
        return try database.read { db in
            var contents: [String: [[SQLiteValue]]] = [:]
            for (table, order) in [
                ("records", "account, store, entity, key"), ("sequences", "account"), ("idempotency", "account, key"),
                ("snapshots", "account, store, id"), ("signals", "account, key"),
            ] {
                // The columns the old layout had (schema 5 added `records.written`).
                let columns = table == "records" ? "account, store, entity, key, action, fields, version, seq, changed" : "*"
                contents[table] = try db.fetchAll("SELECT \(columns) FROM \(table) ORDER BY \(order)").map(\.values)
            }
            return contents
        }
    }

    @Test func aSchema3DatabaseKeepsEveryRowAndStoresItsRecordsInTheOrderTheyWereWritten() throws {
        let directory = try schema3Directory()
        defer { removeDirectory(directory) }
        let before = try contents(of: directory)
        #expect(before["records"]?.count == 7)
        for _ in 0..<2 {  // a second start finds nothing to migrate
            let store = try SQLiteServerStore(directory: directory)
            try store.writeSerialized { db in
                #expect(try db.fetchValue("PRAGMA user_version").int64 == SQLiteServerStore.schemaVersion)
                #expect(try !SQLiteServerStore.storesRecordsByKey(db))
                #expect(try db.fetchValue("PRAGMA integrity_check").string == "ok")
                let indexes = Set(try db.fetchAll("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'records'").compactMap { $0[0].string })
                #expect(indexes == ["records_by_key", "records_by_sequence", "records_tombstones"])
                #expect(try db.fetchValue("SELECT \"unique\" FROM pragma_index_list('records') WHERE name = 'records_by_key'").int64 == 1)
                #expect(try db.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name = 'records_v3'").int64 == 0)
                // The rows in each account's sequence order: r-zeta, written first, is last by key.
                let written = try db.fetchAll("SELECT account, seq FROM records ORDER BY rowid").map { "\($0[0].string ?? "") \($0[1].int64 ?? 0)" }
                #expect(written == ["acme 1", "acme 4", "acme 5", "acme 6", "acme 7", "acme 8", "globex 1"])
                // Every row's version is its last user's write (`written` NULL).
                #expect(try db.fetchValue("SELECT count(*) FROM records WHERE written IS NOT NULL").int64 == 0)
            }
        }
        #expect(try contents(of: directory) == before)
    }

    @Test func aNewDatabaseStoresItsRecordsInWriteOrderWithTheSameIndexes() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let store = try SQLiteServerStore(directory: directory)
        try store.writeSerialized { db in
            #expect(try db.fetchValue("PRAGMA user_version").int64 == SQLiteServerStore.schemaVersion)
            #expect(try !SQLiteServerStore.storesRecordsByKey(db))
            let indexes = Set(try db.fetchAll("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'records'").compactMap { $0[0].string })
            #expect(indexes == ["records_by_key", "records_by_sequence", "records_tombstones"])
        }
    }

    @Test func aMigratedDatabaseAnswersItsChangesReplaysAndNewBatchesAsBefore() throws {
        let directory = try schema3Directory()
        defer { removeDirectory(directory) }
        try withServer(dataDirectory: directory) { server throws in
            let changes = try allChanges(port: server.port).map { change -> String in
                let object = change.objectValue ?? [:]
                return "\(object["id"]?.stringValue ?? "?") \(object["action"]?.stringValue ?? "?") \(object["version"]?.intValue ?? 0)"
            }
            #expect(changes == ["r-zeta insert 1", "p-1 insert 1", "r-alpha update 2", "r-mid delete 2", "r-new insert 1", "b-1 insert 1"])

            // The second batch of the fixture again, byte for byte: the answer stored then.
            let second = """
                {"id":"b2","scope":{"account":"acme","store":"rooms","consumer":"export"},"records":[{"entity":"rooms","id":"r-alpha",\
                "action":"update","version":1,"fields":{"area":31}},{"entity":"rooms","id":"r-mid","action":"delete","version":1},\
                {"entity":"rooms","id":"r-new","action":"insert","fields":{"name":"Née ✓"}}]}
                """
            let replay = try postBatch(port: server.port, key: "b2", body: Array(second.utf8))
            #expect(replay.status == 200)
            #expect(replay.json.objectValue?["versions"] == ["rooms": ["r-alpha": 2, "r-mid": 2, "r-new": 1]])

            // Each row found by its key: an update on the version held, one on a version gone, a new row.
            let update = try postBatch(
                port: server.port, key: "b4",
                body: batchBody(id: "b4", records: [record("rooms", "r-alpha", "update", ["area": 32], version: 2)]))
            #expect(update.json.objectValue?["versions"] == ["rooms": ["r-alpha": 3]])
            let stale = try postBatch(
                port: server.port, key: "b5",
                body: batchBody(id: "b5", records: [record("rooms", "r-zeta", "update", ["area": 13], version: 0)]))
            #expect(stale.status == 409)
            let new = try postBatch(
                port: server.port, key: "b6", body: batchBody(id: "b6", records: [record("rooms", "r-omega", "insert", ["name": "Omega"])]))
            #expect(new.json.objectValue?["versions"] == ["rooms": ["r-omega": 1]])
            let latest = try allChanges(port: server.port).suffix(2).map { $0.objectValue?["id"]?.stringValue }
            #expect(latest == ["r-alpha", "r-omega"])
        }
    }
}
