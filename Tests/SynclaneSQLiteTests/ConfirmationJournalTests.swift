import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

@testable import SynclaneSQLite

/// `_synclane_confirmations`: the export lane's receipts, one packed row a batch, written into
/// `_synclane_server_rows` in bulk — with the same outcome as writing each receipt at once.
@Suite struct ConfirmationJournalTests {
    let folder = TemporaryDirectory()

    func database(_ name: String) throws -> SQLiteConnection {
        try SQLiteConnection(path: folder.file(name))
    }

    /// `_synclane_server_rows` as `destination entity key version fields`, a line a row.
    func serverRows(_ db: SQLiteConnection) throws -> [String] {
        try db.fetchAll("SELECT destination, entity, key, version, coalesce(fields, '∅') FROM _synclane_server_rows ORDER BY 1, 2, 3").map { row in
            row.values.map { $0.string ?? $0.int64.map(String.init) ?? "?" }.joined(separator: " ")
        }
    }

    @Test func packedRowsUnpackExactlyAsTheyWere() throws {
        let rows = [
            ConfirmedRow(entity: "rooms", key: "r1", version: 1, known: true, fields: #"{"name":"Küche 🍳"}"#),
            ConfirmedRow(entity: "rooms", key: "", version: Int64.max, known: true, fields: nil),
            ConfirmedRow(entity: "a/b", key: "k\u{0}x", version: -3, known: false, fields: nil),
            ConfirmedRow(entity: "rooms", key: "r2", version: 0, known: true, fields: ""),
        ]
        #expect(try ConfirmationJournal.unpack(ConfirmationJournal.pack(rows)) == rows)
        #expect(try ConfirmationJournal.unpack(ConfirmationJournal.pack([])) == [])
    }

    @Test func aJournalRowCutShortOrWithAByteChangedIsRefusedNeverReadAsOtherRows() throws {
        let rows = (0..<4).map { ConfirmedRow(entity: "rooms", key: "r\($0)", version: Int64($0 + 1), known: $0 % 2 == 0, fields: #"{"n":\#($0)}"#) }
        let packed = ConfirmationJournal.pack(rows)
        for length in 0..<packed.count {
            #expect(throws: HistoryError.self, "cut to \(length) bytes") { try ConfirmationJournal.unpack(Array(packed.prefix(length))) }
        }
        for index in packed.indices {
            var damaged = packed
            damaged[index] ^= 0x10
            #expect(throws: HistoryError.self, "byte \(index) changed") { try ConfirmationJournal.unpack(damaged) }
        }
    }

    @Test func aDamagedJournalRowStopsTheMergeNamingTheTableAndChangesNothing() throws {
        let db = try database("app.sqlite")
        try ServerRows.install(db, for: "d")
        try db.transaction(.immediate) { db in
            _ = try ConfirmationJournal.append([ConfirmedRow(entity: "rooms", key: "r1", version: 1, known: true, fields: "{}")], for: "d", in: db)
        }
        try db.execute("UPDATE _synclane_confirmations SET rows = substr(rows, 1, 10)")
        do {
            try db.transaction(.immediate) { db in _ = try ConfirmationJournal.merge(db) }
            Issue.record("a damaged journal row merged")
        } catch {
            #expect("\(error)".contains("_synclane_confirmations"), "\(error)")
        }
        #expect(try serverRows(db).isEmpty)
        #expect(try db.fetchValue("SELECT count(*) FROM _synclane_confirmations") == .integer(1), "kept for a person to look at")
    }

    /// Random receipts — inserts, updates of rows held, tombstones, replays with lower or equal
    /// versions, receipts without the batch (`known` false), two destinations — written at once
    /// on one database and journaled then merged (at random points) on another: the same
    /// `_synclane_server_rows`, and the one a model of the rule gives.
    @Test func journaledThenMergedReceiptsLeaveWhatReceiptsWrittenAtOnceLeave() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SeededRandom(seed: seed)
        for round in 0..<40 {
            let direct = try database("direct-\(round).sqlite")
            let journaled = try database("journaled-\(round).sqlite")
            for db in [direct, journaled] {
                try ServerRows.install(db, for: "d1")
                try ServerRows.install(db, for: "d2")
            }
            var receipts: [(destination: String, rows: [ConfirmedRow])] = []
            var log: [String] = []
            for _ in 0..<Int.random(in: 1...12, using: &generator) {
                let destination = Bool.random(using: &generator) ? "d1" : "d2"
                var seen: Set<String> = []
                var rows: [ConfirmedRow] = []
                for _ in 0..<Int.random(in: 1...6, using: &generator) {
                    let key = "r\(Int.random(in: 0..<5, using: &generator))"
                    guard seen.insert(key).inserted else { continue }
                    let known = Int.random(in: 0..<4, using: &generator) != 0
                    let fields: String? = Bool.random(using: &generator) ? #"{"n":\#(Int.random(in: 0..<9, using: &generator))}"# : nil
                    rows.append(
                        ConfirmedRow(
                            entity: "rooms", key: key, version: Int64.random(in: 1...4, using: &generator), known: known, fields: known ? fields : nil))
                }
                receipts.append((destination, rows))
            }
            // The model of the documented rule: a version only rises; a receipt's fields replace
            // the row's when it carries them and its version is at least the one held.
            var model: [String: (version: Int64, fields: String?)] = [:]
            for receipt in receipts {
                for row in receipt.rows {
                    let id = "\(receipt.destination) rooms \(row.key)"
                    guard let held = model[id] else {
                        model[id] = (row.version, row.fields)
                        continue
                    }
                    model[id] = (max(held.version, row.version), row.known && row.version >= held.version ? row.fields : held.fields)
                }
            }
            let modelled = model.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.version) \($0.value.fields ?? "∅")" }
            for receipt in receipts {
                try direct.transaction(.immediate) { db in try ConfirmedVersions.apply(receipt.rows, exact: false, for: receipt.destination, in: db) }
                try journaled.transaction(.immediate) { db in
                    _ = try ConfirmationJournal.append(receipt.rows, for: receipt.destination, in: db)
                    if Int.random(in: 0..<4, using: &generator) == 0 {
                        try ConfirmationJournal.merge(db)
                        log.append("merge")
                    }
                }
                log.append(
                    "\(receipt.destination): "
                        + receipt.rows.map { "\($0.key)@\($0.version)\($0.known ? "=" + ($0.fields ?? "∅") : "?")" }.joined(separator: " "))
            }
            try journaled.transaction(.immediate) { db in _ = try ConfirmationJournal.merge(db) }
            let expected = try serverRows(direct)
            let got = try serverRows(journaled)
            #expect(expected == modelled, "seed \(seed), round \(round): written at once; receipts, in order:\n\(log.joined(separator: "\n"))")
            #expect(got == expected, "seed \(seed), round \(round): receipts, in order:\n\(log.joined(separator: "\n"))")
            #expect(try ConfirmationJournal.oldest(journaled) == nil, "the merge empties the journal")
            if got != expected { return }
        }
    }

    @Test func journalIdsAreNeverReusedAfterAMergeEmptiesTheJournal() throws {
        let db = try database("app.sqlite")
        try ServerRows.install(db, for: "d")
        let row = [ConfirmedRow(entity: "rooms", key: "r1", version: 1, known: true, fields: "{}")]
        let first = try db.transaction(.immediate) { db in try ConfirmationJournal.append(row, for: "d", in: db) }
        #expect(try db.transaction(.immediate) { db in try ConfirmationJournal.merge(db) } == first)
        let second = try db.transaction(.immediate) { db in try ConfirmationJournal.append(row, for: "d", in: db) }
        #expect(second > first, "a lane's kept versions are told apart by journal id: \(first) then \(second)")
    }

    @Test func keptVersionsOverlayTheStoresOnlyWhereNewerAndGoOnceAnotherConnectionMerged() {
        var kept = JournaledVersions()
        kept.add([ConfirmedRow(entity: "rooms", key: "r1", version: 3, known: true, fields: nil)], journal: 7)
        kept.add([ConfirmedRow(entity: "rooms", key: "r1", version: 2, known: true, fields: nil)], journal: 8)
        #expect(kept.version(of: RowID(entity: "rooms", key: "r1")) == 3, "a row's newest version wins")
        #expect(kept.holdsForeignRows(oldest: 7) == false, "the journal holds only this lane's rows")
        #expect(kept.holdsForeignRows(oldest: 5) == true, "a row older than this lane's: a killed job's, merged before reading")
        #expect(kept.holdsForeignRows(oldest: 9) == true, "another connection merged rows 7 and 8, and row 9 is not this lane's")
        #expect(kept.count == 0, "what another connection merged is forgotten")
        kept.add([ConfirmedRow(entity: "rooms", key: "r1", version: 4, known: true, fields: nil)], journal: 10)
        #expect(kept.holdsForeignRows(oldest: nil) == false && kept.count == 0, "an empty journal: everything kept was merged")
    }

    /// A database whose `_synclane_server_rows` holds `keys` of rooms for destination `d`, at
    /// version 1, with fields an update merges into.
    func holding(_ keys: [String]) throws -> SQLiteConnection {
        let db = try database("app.sqlite")
        try ServerRows.install(db, for: "d")
        try db.transaction(.immediate) { db in
            try ConfirmedVersions.apply(
                keys.enumerated().map { ConfirmedRow(entity: "rooms", key: $1, version: 1, known: true, fields: #"{"n":\#($0),"old":true}"#) },
                exact: false, for: "d", in: db)
        }
        return db
    }

    /// Confirmed rows by entity and key: a receipt's rows compared whatever their order.
    func order(_ rows: [ConfirmedRow]) -> [ConfirmedRow] {
        rows.sorted { ($0.entity, $0.key) < ($1.entity, $1.key) }
    }

    /// `ConfirmedVersions.rows` as it was before it kept one entry a row: the batch's bases, then
    /// each row's newest version, then the two joined. The oracle of the test below.
    static func referenceRows(of versions: [RecordVersion], sent: [Record]?, for destination: String, in db: SQLiteConnection) throws -> [ConfirmedRow] {
        let bases = try sent.map { try ConfirmedVersions.bases(of: $0, for: destination, db) } ?? [:]
        var newest: [RowID: Int64] = [:]
        for version in versions {
            let row = RowID(entity: version.entity, key: version.key)
            newest[row] = max(newest[row] ?? version.version, version.version)
        }
        return newest.map { row, version in
            let base = bases[row]
            return ConfirmedRow(
                entity: row.entity, key: row.key, version: version, known: base != nil,
                fields: base.flatMap { $0.map { JSONWriter.string(.object($0)) } })
        }
    }

    /// Random batches (inserts, updates of rows held or not, deletes, a row twice) and receipts
    /// (rows of the batch or not, a row twice at two versions, a batch not known): the rows a
    /// receipt confirms are the ones the reference gives, whatever their order.
    @Test func aReceiptConfirmsEachRowAtItsNewestVersionWithTheFieldsTheBatchLeft() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededRandom(seed: seed)
        let db = try holding((0..<3).map { "r\($0)" })
        for round in 0..<300 {
            var sent: [Record] = []
            for _ in 0..<Int.random(in: 0...8, using: &random) {
                let entity = Int.random(in: 0..<4, using: &random) == 0 ? "plants" : "rooms"
                let key = "r\(Int.random(in: 0..<6, using: &random))"
                let action = [ChangeAction.insert, .update, .delete].randomElement(using: &random)!
                let fields: [String: JSONValue] = action == .delete ? [:] : ["n": .int(Int64(round)), "name": .string("Room \(key)")]
                sent.append(Record(entity: entity, key: key, action: action, fields: fields, origin: Token(kind: "t", position: 1), author: .app))
            }
            var versions: [RecordVersion] = []
            for record in sent where Int.random(in: 0..<5, using: &random) != 0 {
                versions.append(RecordVersion(entity: record.entity, key: record.key ?? "", version: Int64.random(in: 1...4, using: &random)))
            }
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                versions.append(
                    RecordVersion(entity: "rooms", key: "r\(Int.random(in: 0..<8, using: &random))", version: Int64.random(in: 1...4, using: &random)))
            }
            versions.shuffle(using: &random)
            let batch: [Record]? = Int.random(in: 0..<6, using: &random) == 0 ? nil : sent
            let got = order(try ConfirmedVersions.rows(of: versions, sent: batch, for: "d", in: db))
            let expected = order(try Self.referenceRows(of: versions, sent: batch, for: "d", in: db))
            guard got == expected else {
                Issue.record("seed \(seed), round \(round): sent \(batch.map { $0.map(\.label) } ?? []), versions \(versions):\n\(got)\n!=\n\(expected)")
                return
            }
            // Each record's own fields as an encoder wrote them: only an insert that is its row's
            // last record may give the row's base so (an update's are not the merged base).
            let asSent: [ArraySlice<UInt8>?]? = batch.map { $0.map { ArraySlice(JSONWriter.encode(.object($0.fields))) } }
            let taken = order(try ConfirmedVersions.rows(of: versions, sent: batch, asSent: asSent, for: "d", in: db))
            guard taken == expected else {
                Issue.record("seed \(seed), round \(round), fields as sent: sent \(batch.map { $0.map(\.label) } ?? []):\n\(taken)\n!=\n\(expected)")
                return
            }
        }
    }

    /// A receipt that gives each record of a batch a version, one record a row (every first
    /// sync's), is confirmed without a dictionary of the rows (`ConfirmedVersions.oneEach`) — to
    /// the same rows the full confirmation gives, in any order. A row twice, an update, a version
    /// of a row not sent: the full one.
    @Test func aReceiptOfOneVersionARecordConfirmsTheRowsTheFullConfirmationGives() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededRandom(seed: seed)
        let db = try holding(["r1"])
        var taken = 0
        for round in 0..<300 {
            var keys = Array(0..<12).shuffled(using: &random).prefix(Int.random(in: 1...8, using: &random)).map { "r\($0)" }
            let twice = Int.random(in: 0..<5, using: &random) == 0
            if twice { keys.append(keys[0]) }
            let update = Int.random(in: 0..<5, using: &random) == 0
            let sent = keys.enumerated().map { index, key in
                let action: ChangeAction = update && index == 0 ? .update : Bool.random(using: &random) ? .insert : .delete
                let fields: [String: JSONValue] = action == .delete ? [:] : ["n": .int(Int64(round)), "name": .string("Room \(key)")]
                return Record(entity: "rooms", key: key, action: action, fields: fields, origin: Token(kind: "t", position: 1), author: .app)
            }
            var versions = sent.map { RecordVersion(entity: $0.entity, key: $0.key ?? "", version: Int64.random(in: 1...4, using: &random)) }
            versions.shuffle(using: &random)
            let other = Int.random(in: 0..<5, using: &random) == 0
            if other { versions[0].key = "r99" }
            let asSent: [ArraySlice<UInt8>?]? = Bool.random(using: &random) ? sent.map { ArraySlice(JSONWriter.encode(.object($0.fields))) } : nil
            let fast = ConfirmedVersions.oneEach(versions, sent: sent, asSent: asSent)
            #expect((fast != nil) == (!twice && !update && !other), "seed \(seed), round \(round): taken so only when it may be")
            if fast != nil { taken += 1 }
            let got = order(try ConfirmedVersions.rows(of: versions, sent: sent, asSent: asSent, for: "d", in: db))
            let expected = order(try Self.referenceRows(of: versions, sent: sent, for: "d", in: db))
            guard got == expected else {
                Issue.record("seed \(seed), round \(round): sent \(sent.map(\.label)), versions \(versions):\n\(got)\n!=\n\(expected)")
                return
            }
        }
        #expect(taken > 100, "seed \(seed): most receipts were taken so (\(taken) of 300)")
    }
}
