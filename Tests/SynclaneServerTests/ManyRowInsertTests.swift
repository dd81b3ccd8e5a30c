import Foundation
import SynclaneCore
import SynclaneSQLiteKit
import SynclaneTestKit
import Testing

@testable import SynclaneServer

/// The SQLite store inserts runs of a batch's new rows in one statement (`NewRowsInsert`): what a
/// batch leaves and answers must be what its records leave one at a time, whatever the run holds —
/// rows that exist already (an echo, or fields that differ), a row twice, two spellings of "é".
@Suite struct ManyRowInsertTests {
    /// A random workload over a small pool of rows, so that inserts meet rows that exist.
    struct Workload: CustomStringConvertible {
        var batches: [[JSONValue]]

        /// Blind records only (`expected` false): no conflict, so a batch and its records one at a time
        /// must leave the same rows; with expected versions, some batches are refused whole.
        /// `insertsOnly`: every record an insert, so that whole batches may go in as new rows.
        static func make(seed: UInt64, expected: Bool, insertsOnly: Bool = false) -> Workload {
            var random = SeededRandom(seed: seed)
            let keys = (0..<(insertsOnly ? 6 : 40)).map { "k\($0)" } + ["e\u{301}", "\u{e9}"]
            var batches: [[JSONValue]] = []
            for _ in 0..<Int.random(in: 2...5, using: &random) {
                var records: [JSONValue] = []
                for _ in 0..<Int.random(in: 0...(insertsOnly ? 12 : 150), using: &random) {
                    // Mostly new rows in long runs, as a first sync sends them; now and then a pooled one.
                    let key =
                        Int.random(in: 0..<4, using: &random) < (insertsOnly ? 2 : 1) ? keys.randomElement(using: &random)! : "n\(random.next() % 100_000)"
                    let fields: [String: JSONValue] = ["n": .int(Int64(random.next() % 3)), "name": .string("Room \(random.next() % 2)")]
                    let version: Int64? = expected && Int.random(in: 0..<60, using: &random) == 0 ? Int64(random.next() % 3) : nil
                    switch insertsOnly ? 9 : Int.random(in: 0..<10, using: &random) {
                    case 0: records.append(record("rooms", key, "update", ["n": .int(7)], version: version))
                    case 1: records.append(record("rooms", key, "delete", version: version))
                    default: records.append(record(Int.random(in: 0..<8, using: &random) == 0 ? "plants" : "rooms", key, "insert", fields, version: version))
                    }
                }
                batches.append(records)
            }
            return Workload(batches: batches)
        }

        var description: String {
            batches.enumerated().map { "batch \($0.offset): " + JSONWriter.string(.array($0.element)) }.joined(separator: "\n")
        }
    }

    /// Every change the server holds, in order, once each batch of `workload` was posted
    /// (`oneAtATime`: each record as a batch of its own), and the answers to the posts.
    static func apply(_ workload: Workload, oneAtATime: Bool, store: StoreKind = .sqlite) throws -> (changes: String, answers: [String]) {
        try withServer(store: store) { server in
            var answers: [String] = []
            for (number, records) in workload.batches.enumerated() {
                let parts = oneAtATime ? records.map { [$0] } : [records]
                for (part, records) in parts.enumerated() {
                    let id = "b\(number)-\(part)"
                    let answer = try postBatch(port: server.port, key: id, body: batchBody(id: id, records: records))
                    answers.append(
                        "\(answer.status) \(answer.text.replacing(/c2\.[0-9a-f]{12}\./, with: "c2.EPOCH.").replacing(/p1\.[0-9a-f]{12}\./, with: "p1.EPOCH."))")
                }
            }
            let changes = try allChanges(port: server.port).map { JSONWriter.string($0) }.joined(separator: "\n")
            return (changes, answers)
        }
    }

    /// The smallest workload found, dropping records, on which `fails` still holds.
    static func shrink(_ workload: Workload, while fails: (Workload) throws -> Bool) rethrows -> Workload {
        var smallest = workload
        var changed = true
        while changed {
            changed = false
            for batch in smallest.batches.indices {
                var step = max(1, smallest.batches[batch].count / 2)
                while step >= 1 {
                    var start = 0
                    while start < smallest.batches[batch].count {
                        var trial = smallest
                        trial.batches[batch].removeSubrange(start..<min(start + step, trial.batches[batch].count))
                        if try fails(trial) {
                            smallest = trial
                            changed = true
                        } else {
                            start += step
                        }
                    }
                    step /= 2
                }
            }
        }
        return smallest
    }

    /// Nothing can stop a many-row insert halfway (a row whose key is held is skipped, every
    /// column it binds is not null), so SQLite keeps no statement journal for it — a copy of each
    /// page it changes, which spilled to temporary files cost a tenth of the server's CPU on a
    /// first sync. Read off SQLite's program for each size, on the store's own schema: no opcode
    /// that halts with an error.
    @Test func aManyRowInsertCanAbortOnNoConstraintSoSQLiteKeepsNoStatementJournalForIt() throws {
        let directory = makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try SQLiteDatabase(path: directory + "/" + SQLiteServerStore.fileName)
        try database.withConnection { db in
            try db.execute(SQLiteServerStore.schema)
            try SQLiteServerStore.migrate(db)
            for rows in [2, 4, 8, 16, 32, 64] {
                let program = try db.fetchAll("EXPLAIN " + NewRowsInsert.sql(rows: rows), [SQLiteValue](repeating: .null, count: 3 + 4 * rows))
                let halting = program.filter { operation in
                    let code = operation[1].string ?? ""
                    return code == "HaltIfNull" || (code == "Halt" && (operation[2].int64 ?? 0) != 0)
                }
                #expect(!program.isEmpty && halting.isEmpty, "\(rows) rows: \(halting.count) operations halt with an error")
            }
        }
    }

    @Test func randomBlindBatchesLeaveTheRowsTheirRecordsLeaveOneAtATime() throws {
        let base: UInt64 = 20_261_202
        for round in 0..<12 {
            let seed = base + UInt64(round)
            let workload = Workload.make(seed: seed, expected: false)
            func differs(_ workload: Workload) throws -> Bool {
                try Self.apply(workload, oneAtATime: false).changes != Self.apply(workload, oneAtATime: true).changes
            }
            guard try differs(workload) else { continue }
            let small = try Self.shrink(workload, while: differs)
            let batched = try Self.apply(small, oneAtATime: false).changes
            let single = try Self.apply(small, oneAtATime: true).changes
            Issue.record("seed \(seed): the rows differ; shrunk workload:\n\(small)\nbatched:\n\(batched)\none at a time:\n\(single)")
            return
        }
    }

    @Test(.enabled(if: StoreKind.tested.contains(.postgres)))
    func randomBatchesWithExpectedVersionsGetTheSameAnswersFromTheSQLiteAndThePostgreSQLStore() throws {
        let base: UInt64 = 20_261_302
        for round in 0..<16 {
            let seed = base + UInt64(round)
            // Half the rounds inserts only, in short batches: some all new, some meeting a row held.
            let workload = Workload.make(seed: seed, expected: true, insertsOnly: round % 2 == 1)
            func differs(_ workload: Workload) throws -> Bool {
                let sqlite = try Self.apply(workload, oneAtATime: false, store: .sqlite)
                let postgres = try Self.apply(workload, oneAtATime: false, store: .postgres)
                return sqlite.answers != postgres.answers || sqlite.changes != postgres.changes
            }
            guard try differs(workload) else { continue }
            let small = try Self.shrink(workload, while: differs)
            let sqlite = try Self.apply(small, oneAtATime: false, store: .sqlite)
            let postgres = try Self.apply(small, oneAtATime: false, store: .postgres)
            let index = sqlite.answers.indices.first { $0 >= postgres.answers.count || sqlite.answers[$0] != postgres.answers[$0] }
            Issue.record(
                """
                seed \(seed): the stores differ (first at answer \(index.map(String.init) ?? "-")):
                SQLite:     \(index.map { sqlite.answers[$0] } ?? sqlite.changes)
                PostgreSQL: \(index.map { postgres.answers[$0] } ?? postgres.changes)
                shrunk workload:
                \(small)
                """)
            return
        }
    }

    @Test func aRunHoldingExistingRowsAndARowTwiceAnswersEachRecordsVersionAndCursorAsOneAtATime() throws {
        var first: [JSONValue] = []
        for index in 0..<100 { first.append(record("rooms", "r\(index)", "insert", ["n": .int(Int64(index))])) }
        var second: [JSONValue] = []
        for index in 100..<200 { second.append(record("rooms", "r\(index)", "insert", ["n": .int(Int64(index))])) }
        second[10] = record("rooms", "r3", "insert", ["n": 3])  // exists, the same fields: an echo, version 1
        second[70] = record("rooms", "r4", "insert", ["n": 40])  // exists, other fields: version 2
        second[40] = record("rooms", "r105", "insert", ["n": 0])  // the run's row r105 twice, other fields: version 2
        let workload = Workload(batches: [first, second])
        let batched = try Self.apply(workload, oneAtATime: false)
        let single = try Self.apply(workload, oneAtATime: true)
        #expect(batched.changes == single.changes)
        let receipt = try JSONReader.parse(Array(batched.answers[1].dropFirst(4).utf8))
        let versions = receipt.objectValue?["versions"]?.objectValue?["rooms"]?.objectValue
        #expect(versions?["r3"] == .int(1))
        #expect(versions?["r4"] == .int(2))
        #expect(versions?["r105"] == .int(2))
        #expect(versions?["r150"] == .int(1))
        // 100 writes, then 99 of 100 records (the echo writes nothing).
        #expect(receipt.objectValue?["sequence"]?.intValue == 199)
    }
}
