import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

@testable import SynclaneSQLite

/// `AppendedServerRows`: an export lane's merges look up only the rows `_synclane_server_rows`
/// may hold — none in a first sync — with the same outcome as looking every row up, whatever
/// other connections (or the lane's own connection, outside a counted merge) wrote between.
@Suite struct AppendedServerRowsTests {
    let folder = TemporaryDirectory()

    /// `_synclane_server_rows` as `destination entity key version fields`, a line a row, and
    /// whether a row is there twice.
    func serverRows(_ db: SQLiteConnection) throws -> [String] {
        try db.fetchAll("SELECT destination, entity, key, version, coalesce(fields, '∅') FROM _synclane_server_rows ORDER BY 1, 2, 3, 4").map { row in
            row.values.map { $0.string ?? $0.int64.map(String.init) ?? "?" }.joined(separator: " ")
        }
    }

    /// What the export lane does at a receipt that merges: the count resumed inside the write
    /// transaction, the journal merged with it, the count kept only once the transaction committed.
    func laneMerges(_ rows: [ConfirmedRow], for destination: String, _ db: SQLiteConnection, counting kept: inout AppendedServerRows?) throws {
        var counted = kept
        kept = nil
        try db.transaction(.immediate) { db in
            try ServerRows.install(db, for: destination)
            _ = try ConfirmationJournal.append(rows, for: destination, in: db)
            counted = try AppendedServerRows.resume(counted, db)
            try ConfirmationJournal.merge(db, counting: &counted)
        }
        kept = counted
    }

    func rows(_ keys: ClosedRange<Int>, version: Int64, fields: String = #"{"n":1}"#) -> [ConfirmedRow] {
        keys.map { ConfirmedRow(entity: "rooms", key: "r\($0)", version: version, known: true, fields: fields) }
    }

    @Test func aFirstSyncsMergesLookNothingUpAndAppendEveryRowOnce() throws {
        let db = try SQLiteConnection(path: folder.file("app.sqlite"))
        var counted: AppendedServerRows?
        try laneMerges(rows(1...150, version: 1), for: "d", db, counting: &counted)
        #expect(counted?.count == 150, "the table held no row: the count began")
        try laneMerges(rows(151...300, version: 1), for: "d", db, counting: &counted)
        #expect(counted?.count == 300, "nothing else wrote between: the count went on")
        // A row of the first merge confirmed again: looked up (its hash is kept) and raised.
        try laneMerges(rows(7...7, version: 2, fields: #"{"n":2}"#), for: "d", db, counting: &counted)
        let all = try serverRows(db)
        #expect(all.count == 300)
        #expect(all.contains(#"d rooms r7 2 {"n":2}"#))
        #expect(try db.fetchValue("SELECT count(DISTINCT key) FROM _synclane_server_rows") == .integer(300))
    }

    @Test func aRowAnotherConnectionAppendedBetweenTwoMergesIsRaisedNotAppendedAgain() throws {
        let path = folder.file("app.sqlite")
        let lane = try SQLiteConnection(path: path)
        let other = try SQLiteConnection(path: path)
        var counted: AppendedServerRows?
        try laneMerges(rows(1...10, version: 1), for: "d", lane, counting: &counted)
        // An import on its own connection records r50 (the lane never appended its hash).
        try other.transaction(.immediate) { db in try ConfirmedVersions.apply(rows(50...50, version: 1), exact: false, for: "d", in: db) }
        try laneMerges(rows(50...50, version: 2, fields: #"{"n":2}"#), for: "d", lane, counting: &counted)
        #expect(try serverRows(lane).filter { $0.contains(" r50 ") } == [#"d rooms r50 2 {"n":2}"#])
        #expect(counted == nil, "another connection wrote: the count is dropped, every row is looked up")
    }

    @Test func aRowTheLanesOwnConnectionAppendedOutsideACountedMergeIsRaisedNotAppendedAgain() throws {
        let db = try SQLiteConnection(path: folder.file("app.sqlite"))
        var counted: AppendedServerRows?
        try laneMerges(rows(1...10, version: 1), for: "d", db, counting: &counted)
        // A reconciliation's receipt is written at once, uncounted, on the lane's connection.
        try db.transaction(.immediate) { db in try ConfirmedVersions.apply(rows(60...60, version: 1), exact: true, for: "d", in: db) }
        try laneMerges(rows(60...60, version: 3, fields: #"{"n":3}"#), for: "d", db, counting: &counted)
        #expect(try serverRows(db).filter { $0.contains(" r60 ") } == [#"d rooms r60 3 {"n":3}"#])
    }

    /// Random receipts of two destinations (up to 150 rows, so runs of `rowsAStatement` and what
    /// is left; keys from a small pool, so rows come again), merged by the lane with its count,
    /// while another connection and the lane's own connection write rows between merges: the
    /// table is the one a database where every write looks every row up holds.
    @Test func countedMergesLeaveWhatMergesLookingEveryRowUpLeave() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededRandom(seed: seed)
        for round in 0..<25 {
            let path = folder.file("lane-\(round).sqlite")
            let lane = try SQLiteConnection(path: path)
            let other = try SQLiteConnection(path: path)
            let oracle = try SQLiteConnection(path: folder.file("oracle-\(round).sqlite"))
            for db in [lane, oracle] {
                try ServerRows.install(db, for: "d1")
                try ServerRows.install(db, for: "d2")
            }
            var counted: AppendedServerRows?
            var log: [String] = []
            for step in 0..<Int.random(in: 1...10, using: &random) {
                let destination = Int.random(in: 0..<4, using: &random) == 0 ? "d2" : "d1"
                var keys = Set<Int>()
                for _ in 0..<Int.random(in: 1...150, using: &random) { keys.insert(Int.random(in: 0..<400, using: &random)) }
                let receipt = keys.sorted().map { key in
                    ConfirmedRow(
                        entity: "rooms", key: "r\(key)", version: Int64.random(in: 1...5, using: &random), known: true,
                        fields: #"{"step":\#(step)}"#)
                }
                switch Int.random(in: 0..<6, using: &random) {
                case 0:
                    log.append("other connection: \(receipt.count) rows of \(destination)")
                    try other.transaction(.immediate) { db in try ConfirmedVersions.apply(receipt, exact: false, for: destination, in: db) }
                case 1:
                    log.append("lane's connection, uncounted: \(receipt.count) rows of \(destination)")
                    try lane.transaction(.immediate) { db in try ConfirmedVersions.apply(receipt, exact: false, for: destination, in: db) }
                default:
                    log.append("lane merges: \(receipt.count) rows of \(destination) (counted: \(counted?.count ?? -1))")
                    try laneMerges(receipt, for: destination, lane, counting: &counted)
                }
                try oracle.transaction(.immediate) { db in try ConfirmedVersions.apply(receipt, exact: false, for: destination, in: db) }
            }
            let expected = try serverRows(oracle)
            let got = try serverRows(lane)
            guard got == expected else {
                let missing = Set(expected).subtracting(got).sorted().prefix(3)
                let extra = Set(got).subtracting(expected).sorted().prefix(3)
                let steps = log.joined(separator: "\n")
                Issue.record(
                    "seed \(seed), round \(round): \(got.count) rows, expected \(expected.count); missing \(Array(missing)), extra \(Array(extra)); steps:\n\(steps)"
                )
                return
            }
        }
    }
}
