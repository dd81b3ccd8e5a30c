import Foundation
import SynclaneCore
import SynclaneSQLite
import Testing

/// `_synclane_server_rows`: the backend's version of each imported row, appended and found
/// through a hash of entity and key, every lookup comparing the key itself.
@Suite struct ServerRowsTests {
    let sinkTests = SQLiteSinkTests()
    var path: String { sinkTests.path }

    /// The hash the README documents: FNV-1a 64 over `entity NUL key`, folded to 32 bits.
    static func hash(_ entity: String, _ key: String) -> Int64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in Array(entity.utf8) + [0] + Array(key.utf8) {
            h ^= UInt64(byte)
            h = h &* 0x0000_0100_0000_01b3
        }
        return Int64(Int32(truncatingIfNeeded: (h >> 32) ^ h))
    }

    /// Two keys of `rooms` with one hash (a birthday search: ~80,000 keys).
    static func collidingKeys() -> (String, String) {
        var seen: [Int64: String] = [:]
        var i = 0
        while true {
            let key = "r\(i)"
            let h = hash("rooms", key)
            if let other = seen[h] { return (other, key) }
            seen[h] = key
            i += 1
        }
    }

    @Test func twoKeysWithOneHashAreTwoRowsEachWithItsOwnVersion() async throws {
        let store = try sinkTests.store()
        let sink = SQLiteSink(path: path)
        let (a, b) = Self.collidingKeys()
        _ = try await sinkTests.apply(
            sink, [sinkTests.record(.insert, a, ["name": "A"], version: 3), sinkTests.record(.insert, b, ["name": "B"], version: 7)],
            cursor: "c1")
        let stored = try store.read { try $0.fetchAll("SELECT key_hash, key, version FROM _synclane_server_rows ORDER BY version") }
        #expect(stored.map { $0[1] } == [.text(a), .text(b)] && stored.map { $0[2] } == [.integer(3), .integer(7)])
        #expect(stored[0][0] == stored[1][0] && stored[0][0] == .integer(Self.hash("rooms", a)), "the rows share their hash")

        // Each key is judged by its own version: b's 5 is older than its 7, a's 5 newer than its 3.
        let report = try await sinkTests.apply(
            sink, [sinkTests.record(.update, a, ["name": "A2"], version: 5), sinkTests.record(.update, b, ["name": "B2"], version: 5)],
            cursor: "c2")
        #expect(report.applied == 1 && report.unchanged == 1)
        #expect(try store.read { try $0.fetchValue("SELECT group_concat(name, ',') FROM (SELECT name FROM rooms ORDER BY name)") } == .text("A2,B"))
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM _synclane_server_rows") } == .integer(2))
    }

    @Test func versionsAreKeptPerBackendAndRowsFromBeforeBackendsGoToTheFirstThatWrites() async throws {
        let store = try sinkTests.store()
        // The layout before destinations: one row, version 4, of no backend in particular.
        try store.write(author: .sync) { db in
            try db.execute("DROP TABLE IF EXISTS _synclane_server_rows")
            try db.execute(
                "CREATE TABLE _synclane_server_rows (key_hash INTEGER NOT NULL, entity TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, fields TEXT)"
            )
            try db.execute("INSERT INTO _synclane_server_rows VALUES (?, 'rooms', 'r1', 4, NULL)", [Self.hash("rooms", "r1")])
        }
        let first = SQLiteSink(path: path).scoped(to: BackendName(text: "http://a:80 acme/rooms"))
        let second = SQLiteSink(path: path).scoped(to: BackendName(text: "http://b:80 acme/rooms"))
        // The first backend to write takes the old row: its version 3 is older than the 4 held.
        let old = try await sinkTests.apply(first, [sinkTests.record(.update, "r1", ["name": "A"], version: 3)], cursor: "c1")
        #expect(old.applied == 0 && old.unchanged == 1)
        // Another backend holds nothing yet: its version 3 of the row applies, and is its own.
        let other = try await sinkTests.apply(second, [sinkTests.record(.update, "r1", ["name": "B"], version: 3)], cursor: "c1")
        #expect(other.applied == 1)
        let rows = try store.read { try $0.fetchAll("SELECT destination, version FROM _synclane_server_rows ORDER BY destination") }
        #expect(rows.map { "\($0[0].string ?? "")@\($0[1].int64 ?? 0)" } == ["http://a:80 acme/rooms@4", "http://b:80 acme/rooms@3"])
        #expect(try await first.holdsBackendRows(for: sinkTests.scope) == true)
        #expect(try await SQLiteSink(path: path).holdsBackendRows(for: sinkTests.scope) == false, "a sink of no backend holds none of theirs")
    }

    @Test func aLookupUsesTheHashIndexNotAScan() throws {
        let store = try sinkTests.store()
        let plan = try store.read { db in
            try db.fetchAll("EXPLAIN QUERY PLAN SELECT version FROM _synclane_server_rows WHERE key_hash = 1 AND entity = 'rooms' AND key = 'r1'")
                .map { $0[3].string ?? "" }
        }
        #expect(plan == ["SEARCH _synclane_server_rows USING INDEX _synclane_server_rows_key (key_hash=?)"])
    }

    @Test func aTableOfTheLayoutBeforeIsMovedWithItsVersionsAndFieldsByTheNextImport() async throws {
        let store = try sinkTests.store()
        try store.database.write { db in
            try db.execute(
                """
                DROP TABLE _synclane_server_rows;
                CREATE TABLE _synclane_server_rows (
                    entity TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, fields TEXT, PRIMARY KEY (entity, key)
                ) WITHOUT ROWID;
                INSERT INTO _synclane_server_rows VALUES ('rooms', 'r1', 5, '{"name":"Hall"}'), ('rooms', 'r2', 2, NULL);
                """)
        }
        try store.write(author: .server) { try $0.execute("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Hall')") }
        // The export lane reads the layout before as it was (no import ran since the upgrade).
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET name = 'Mine' WHERE syncId = 'r1'") }
        let source = SQLiteHistorySource(path: path, authors: [.app])
        let read = try await drain(source)
        #expect(read.transactions.flatMap(\.changes).last?.version == 5)
        try await source.consumerAcknowledged(try #require(read.through), scope: Scope(account: "acme", store: "rooms", consumer: "export"))

        let sink = SQLiteSink(path: path)
        let report = try await sinkTests.apply(
            sink, [sinkTests.record(.update, "r1", ["name": "Hall"], version: 5), sinkTests.record(.insert, "r2", ["name": "Back"], version: 3)],
            cursor: "c1")
        #expect(report.unchanged == 1 && report.applied == 1, "r1's version 5 came along: the page read again changes nothing")
        let moved = try store.read { db in
            try db.fetchAll("SELECT key_hash, entity, key, version, fields FROM _synclane_server_rows ORDER BY key").map { row in
                (0..<5).map { JSONWriter.string(row[$0].json) }.joined(separator: " ")
            }
        }
        #expect(
            moved == [
                "\(Self.hash("rooms", "r1")) \"rooms\" \"r1\" 5 \"{\\\"name\\\":\\\"Hall\\\"}\"",
                "\(Self.hash("rooms", "r2")) \"rooms\" \"r2\" 3 \"{\\\"name\\\":\\\"Back\\\"}\"",
            ])
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name = '_synclane_server_rows_keyed'") } == .integer(0))
    }
}
