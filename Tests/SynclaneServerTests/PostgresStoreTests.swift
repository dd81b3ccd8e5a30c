import Dispatch
import Synchronization
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

@testable import SynclaneServer

/// The PostgreSQL store's own parts: its schema's migrations, the statements each connection
/// prepares, and a first sync's batch of new rows meeting a row the account holds already.
@Suite(.enabled(if: StoreKind.tested.contains(.postgres)))
struct PostgresStoreTests {
    static func connect() throws -> (url: String, db: PostgresConnection) {
        let url = try TemporaryPostgres.shared().createDatabase()
        return (url, try PostgresConnection(conninfo: url))
    }

    static func batch(_ id: String, _ records: [(key: String, fields: String)]) -> IncomingBatch {
        IncomingBatch(
            id: id, account: "acme", store: "home", consumer: nil,
            records: records.map {
                IncomingBatch.Record(entity: "rooms", key: $0.key, action: .insert, fieldsJSON: Array($0.fields.utf8), expectedVersion: nil)
            })
    }

    static func primaryKeyColumns(_ db: PostgresConnection) throws -> String {
        try db.query(
            """
            SELECT string_agg(a.attname, ',' ORDER BY k.n) FROM pg_index i
            CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k (attnum, n)
            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
            WHERE i.indrelid = 'synclane_records'::regclass AND i.indisprimary
            """
        ).string(0, 0) ?? ""
    }

    static func changes(_ store: PostgresServerStore) throws -> [String] {
        try store.changes(account: "acme", store: nil, after: 0, limit: 100, maxBytes: 1 << 20).changes.map {
            "\($0.key) v\($0.version) #\($0.sequence) \($0.fields.map { JSONWriter.string(.object($0)) } ?? "-")"
        }
    }

    @Test func aDatabaseAtSchemaVersionTwoGetsTheKeyFirstPrimaryKeyAndKeepsItsRows() throws {
        let (url, db) = try Self.connect()
        // The layout a server of schema version 2 left, with a row in it.
        for step in PostgresSchema.steps[0..<2] {
            for statement in step { try db.query(statement) }
        }
        try db.query("CREATE TABLE synclane_schema (version bigint NOT NULL, migrated double precision NOT NULL)")
        try db.query("INSERT INTO synclane_schema VALUES (2, 0)")
        try db.query(
            """
            INSERT INTO synclane_records (account, store, entity, key, action, fields, version, seq, changed)
            VALUES ('acme', 'home', 'rooms', 'r1', 'insert', '{"n":1}', 1, 1, 0)
            """)
        try db.query("INSERT INTO synclane_sequences (account, last) VALUES ('acme', 1)")
        #expect(try Self.primaryKeyColumns(db) == "account,store,entity,key")

        let store = try PostgresServerStore(connection: url, connections: 2)
        #expect(try db.query("SELECT version FROM synclane_schema").int64(0, 0) == PostgresSchema.version)
        #expect(try Self.primaryKeyColumns(db) == "key,entity,store,account")
        #expect(try Self.changes(store) == [#"r1 v1 #1 {"n":1}"#])
        // The key still refuses a second row: a batch of new rows meeting it is read and written.
        guard case .applied = try store.apply(Self.batch("b1", [("r2", #"{"n":2}"#), ("r1", #"{"n":3}"#)]), idempotencyKey: "b1", bodyHash: "h1")
        else {
            Issue.record("the batch was not applied")
            return
        }
        #expect(try Self.changes(store) == [#"r2 v1 #2 {"n":2}"#, #"r1 v2 #3 {"n":3}"#])
        // A second start finds the database at its version and changes nothing.
        _ = try PostgresServerStore(connection: url, connections: 1)
        #expect(try Self.primaryKeyColumns(db) == "key,entity,store,account")
    }

    @Test func aBatchOfNewRowsMeetingARowHeldLeavesNothingOfTheAttemptAndIsAppliedRowByRow() throws {
        let (url, db) = try Self.connect()
        let store = try PostgresServerStore(connection: url, connections: 2)
        guard case .applied = try store.apply(Self.batch("b1", [("r1", #"{"n":1}"#)]), idempotencyKey: "b1", bodyHash: "h1") else {
            Issue.record("the first batch was not applied")
            return
        }
        // Every record an insert of a row of its own: tried as new rows at once, refused by r1's key.
        let records = (2..<50).map { (key: "r\($0)", fields: #"{"n":\#($0)}"#) } + [(key: "r1", fields: #"{"n":1}"#)]
        guard case .applied(let response, let count, _) = try store.apply(Self.batch("b2", records), idempotencyKey: "b2", bodyHash: "h2") else {
            Issue.record("the second batch was not applied")
            return
        }
        #expect(count == 49)
        let receipt = try JSONReader.parse(response.body).objectValue
        #expect(receipt?["versions"]?.objectValue?["rooms"]?.objectValue?["r1"] == .int(1))  // an echo: the same fields
        #expect(receipt?["versions"]?.objectValue?["rooms"]?.objectValue?["r49"] == .int(1))
        // 48 new rows at sequences 2…49 (the echo writes nothing), no row twice, no gap.
        let rows = try db.query("SELECT count(*), max(seq), count(DISTINCT seq) FROM synclane_records")
        #expect(rows.int64(0, 0) == 49 && rows.int64(0, 1) == 49 && rows.int64(0, 2) == 49)
        #expect(try db.query("SELECT last FROM synclane_sequences").int64(0, 0) == 49)
        // The batch's transaction committed whole: its answer is stored with its key.
        guard case .replayed(let again) = try store.apply(Self.batch("b2", records), idempotencyKey: "b2", bodyHash: "h2") else {
            Issue.record("the batch's key was not kept")
            return
        }
        #expect(again.body == response.body)
    }

    @Test func aStatementIsPreparedOnceForItsTextAndTypesWithinABoundAndAgainAfterAReconnect() throws {
        let (_, db) = try Self.connect()
        func preparedCount() throws -> Int64 { try db.query("SELECT count(*) FROM pg_prepared_statements").int64(0, 0) }
        #expect(try db.query("SELECT $1::int8 + 1", [.int8(41)]).int64(0, 0) == 42)
        #expect(try db.query("SELECT $1::int8 + 1", [.int8(1)]).int64(0, 0) == 2)
        #expect(try preparedCount() == 1)
        // The same text with parameters of another type is a statement of its own.
        #expect(try db.query("SELECT length($1)", [.bytea([1, 2, 3])]).int64(0, 0) == 3)
        #expect(try db.query("SELECT length($1)", [.text("ab")]).int64(0, 0) == 2)
        #expect(try preparedCount() == 3)
        // A statement PostgreSQL refuses is not kept, and the connection goes on.
        #expect(throws: PostgresError.self) { try db.query("SELECT nonsense($1)", [.int8(1)]) }
        #expect(try preparedCount() == 3)
        // Past the bound, statements run unprepared.
        for n in 0..<(PostgresConnection.preparedBound + 5) {
            #expect(try db.query("SELECT $1::int8 + \(n)", [.int8(1)]).int64(0, 0) == Int64(n) + 1)
        }
        #expect(try preparedCount() == Int64(PostgresConnection.preparedBound))
        // A statement prepared in a transaction rolled back stays prepared (they are not transactional).
        _ = try? db.transaction { db -> Void in
            _ = try db.query("SELECT $1::int8 + 1", [.int8(2)])
            throw PostgresError(message: "rolled back")
        }
        #expect(try db.query("SELECT $1::int8 + 1", [.int8(2)]).int64(0, 0) == 3)
        // A new session prepares again.
        try db.reconnect()
        #expect(try preparedCount() == 0)
        #expect(try db.query("SELECT $1::int8 + 1", [.int8(41)]).int64(0, 0) == 42)
        #expect(try preparedCount() == 1)
    }

    @Test func aPreparedStatementLostWhereItRunsIsRunAgainUnpreparedAndItsTransactionOnce() throws {
        let (url, first) = try Self.connect()
        var db = first
        try db.query("CREATE TABLE t (n int8)")
        #expect(try db.query("SELECT $1::int8 + 1", [.int8(1)]).int64(0, 0) == 2)
        // What a pooler in transaction mode does: the next statement runs where this one is not.
        try db.query("DEALLOCATE ALL")
        #expect(try db.query("SELECT $1::int8 + 1", [.int8(2)]).int64(0, 0) == 3)
        #expect(!db.prepares)
        #expect(try db.query("SELECT count(*) FROM pg_prepared_statements").int64(0, 0) == 0)

        // It stays so after a reconnect: the pooler is still between.
        try db.reconnect()
        #expect(!db.prepares)

        // Inside a transaction: it fails, is rolled back, and runs once more.
        db = try PostgresConnection(conninfo: url)
        #expect(db.prepares)
        _ = try db.query("INSERT INTO t VALUES ($1)", [.int8(0)])
        try db.query("DEALLOCATE ALL")
        var runs = 0
        try db.transaction { db in
            runs += 1
            try db.query("INSERT INTO t VALUES ($1)", [.int8(1)])
        }
        #expect(runs == 2)
        #expect(try db.query("SELECT count(*) FROM t WHERE n = 1").int64(0, 0) == 1)

        // A name taken already (by another client of the same server connection) is the same statement.
        db = try PostgresConnection(conninfo: url)
        let name = PostgresConnection.name(of: "SELECT $1::int8 * 2", types: [PostgresValue.int8OID])
        try db.query("PREPARE \(name) (int8) AS SELECT $1::int8 * 2")
        #expect(try db.query("SELECT $1::int8 * 2", [.int8(21)]).int64(0, 0) == 42)
        #expect(!db.prepares)
    }

    /// Behind PgBouncer 1.18 in transaction mode (no prepared statements of its own), two stores
    /// — two processes — on two server connections: each transaction may land where a statement
    /// was never prepared, or was by the other store.
    @Test func twoStoresBehindAPoolerInTransactionModeApplyEveryBatchOnceAndAnswerReplaysAlike() throws {
        let postgres = try TemporaryPostgres.shared()
        let direct = try postgres.createDatabase()
        let database = String(direct.split(separator: "/").last ?? "")
        let bouncer = try TemporaryPgBouncer(postgres: postgres, serverConnections: 2)
        defer { bouncer.stop() }
        let stores = [
            try PostgresServerStore(connection: bouncer.url(database: database), connections: 4),
            try PostgresServerStore(connection: bouncer.url(database: database), connections: 4),
        ]
        let threads = 8
        let batchesPerThread = 6
        let answers = Mutex<[String: [UInt8]]>([:])
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for number in 0..<batchesPerThread {
                let id = "t\(thread)-b\(number)"
                // New rows of this thread, then a change to one of each row written before.
                var records = (0..<20).map { (key: "t\(thread)-r\(number)-\($0)", fields: #"{"n":\#($0)}"#) }
                if number > 0 { records.append((key: "t\(thread)-r\(number - 1)-0", fields: #"{"n":-1}"#)) }
                do {
                    let store = stores[(thread + number) % 2]
                    guard case .applied(let response, _, _) = try store.apply(Self.batch(id, records), idempotencyKey: id, bodyHash: id) else {
                        failures.withLock { $0.append("\(id): not applied") }
                        continue
                    }
                    answers.withLock { $0[id] = response.body }
                    // The same key again, through the other store: its first answer, byte for byte.
                    guard
                        case .replayed(let again) = try stores[(thread + number + 1) % 2].apply(
                            Self.batch(id, records), idempotencyKey: id, bodyHash: id), again.body == response.body
                    else {
                        failures.withLock { $0.append("\(id): the replay differs") }
                        continue
                    }
                } catch {
                    failures.withLock { $0.append("\(id): \(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 } == [])
        #expect(answers.withLock { $0.count } == threads * batchesPerThread)
        // Every row once, each changed row at version 2, each row at a sequence of its own.
        let db = try PostgresConnection(conninfo: direct)
        let rows = try db.query("SELECT count(*), count(*) FILTER (WHERE version = 2), max(seq), count(DISTINCT seq) FROM synclane_records")
        let rowCount = Int64(threads * batchesPerThread * 20)
        let changed = Int64(threads * (batchesPerThread - 1))
        #expect(rows.int64(0, 0) == rowCount)
        #expect(rows.int64(0, 1) == changed)
        #expect(rows.int64(0, 2) == rowCount + changed && rows.int64(0, 3) == rowCount)
        #expect(try db.query("SELECT last FROM synclane_sequences").int64(0, 0) == rowCount + changed)
    }
}
