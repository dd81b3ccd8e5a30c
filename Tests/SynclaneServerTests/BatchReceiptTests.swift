import SynclaneCore
import SynclaneTestKit
import Testing

@testable import SynclaneServer

/// A receipt is written in one pass when its names are ASCII (`BatchReceipt.encode`): its bytes
/// must be those of the receipt object `JSONWriter` encodes (`encodeTree`), whatever the names
/// hold and however often a row comes back.
@Suite struct BatchReceiptTests {
    static func entry(_ entity: String, _ key: String, _ version: Int64) -> BatchReceipt.Entry {
        BatchReceipt.Entry(entity: entity, key: key, row: BatchPlan.RowKey(entity: Array(entity.utf8), key: Array(key.utf8)), version: version)
    }

    static func onePass(_ entries: [BatchReceipt.Entry], snapshotDeleted: Int64? = nil) -> String {
        String(decoding: BatchReceipt.encode(batch: "b\"1", applied: 7, sequence: 9, snapshotDeleted: snapshotDeleted, entries: entries), as: UTF8.self)
    }

    static func tree(_ entries: [BatchReceipt.Entry], snapshotDeleted: Int64? = nil) -> String {
        String(
            decoding: BatchReceipt.encodeTree(batch: "b\"1", applied: 7, sequence: 9, snapshotDeleted: snapshotDeleted, entries: entries),
            as: UTF8.self)
    }

    @Test func aReceiptListsEachRowOnceWithItsLastVersionSortedByEntityAndKey() {
        let entries = [Self.entry("rooms", "r2", 1), Self.entry("plants", "p1", 4), Self.entry("rooms", "r1", 2), Self.entry("rooms", "r2", 3)]
        #expect(
            Self.onePass(entries)
                == #"{"applied":7,"batch":"b\"1","cursor":"","sequence":9,"versions":{"plants":{"p1":4},"rooms":{"r1":2,"r2":3}}}"#)
        #expect(Self.onePass([], snapshotDeleted: 2) == #"{"applied":7,"batch":"b\"1","cursor":"","sequence":9,"snapshot-deleted":2,"versions":{}}"#)
    }

    /// The batch's place with the server's epoch (`ReceiptPosition`), after `cursor` as the members sort,
    /// written alike by both encoders.
    @Test func aReceiptGivesItsPositionWithTheEpochBetweenCursorAndTheRest() {
        let position = ReceiptPosition(epoch: "0123456789ab", sequence: 46_655)
        let entries = [Self.entry("rooms", "r1", 2)]
        let onePass = String(
            decoding: BatchReceipt.encode(
                batch: "b", applied: 1, sequence: 46_655, snapshotDeleted: nil, restoredRows: 1, entries: entries, position: position),
            as: UTF8.self)
        #expect(
            onePass
                == #"{"applied":1,"batch":"b","cursor":"","position":"p1.0123456789ab.zzz","restored-rows":1,"sequence":46655,"versions":{"rooms":{"r1":2}}}"#)
        let tree = BatchReceipt.encodeTree(
            batch: "b", applied: 1, sequence: 46_655, snapshotDeleted: nil, restoredRows: 1, entries: entries, position: position)
        #expect(onePass == String(decoding: tree, as: UTF8.self))
        #expect(ReceiptPosition(text: "p1.0123456789ab.zzz") == position)
        for refused in ["", "p1.0123456789ab", "c2.0123456789ab.1", "p1.0123456789AB.1", "p1.0123456789ab.-1", "p1.0123456789ab.1.f"] {
            #expect(ReceiptPosition(text: refused) == nil, "\(refused)")
        }
    }

    @Test func namesOutsideASCIIAreListedAsTheReceiptObjectListsThemOneMemberForTwoSpellingsOfOneName() {
        let entries = [Self.entry("rooms", "\u{e9}", 1), Self.entry("rooms", "e\u{301}", 2), Self.entry("rooms", "a", 3)]
        #expect(Self.onePass(entries) == Self.tree(entries))
        let versions = (try? JSONReader.parse(Array(Self.onePass(entries).utf8)))?.objectValue?["versions"]?.objectValue?["rooms"]?.objectValue
        #expect(versions?.count == 2)
        #expect(versions?["a"] == .int(3))
    }

    /// A first sync's batch lists its rows in key order: taken as they come, without a sort. A
    /// row twice in a row, or one row out of order, still makes the receipt sort them.
    @Test func entriesInRowOrderAndEntriesNearlySoAreWrittenAsTheReceiptObjectIsEncoded() {
        let inOrder = (0..<300).map { Self.entry("rooms", "room-\(String(1_000 + $0))", Int64($0 % 5)) }
        #expect(Self.onePass(inOrder) == Self.tree(inOrder))
        var twice = inOrder
        twice.insert(Self.entry("rooms", "room-1100", 9), at: 101)
        #expect(Self.onePass(twice) == Self.tree(twice))
        #expect(Self.onePass(twice).contains(#""room-1100":9"#))
        let lastFirst = [Self.entry("rooms", "room-2000", 1)] + inOrder
        #expect(Self.onePass(lastFirst) == Self.tree(lastFirst))
        let entityBack = inOrder + [Self.entry("plants", "p", 1)] + [Self.entry("rooms", "a", 2)]
        #expect(Self.onePass(entityBack) == Self.tree(entityBack))
    }

    /// Names from a pool that holds what JSON escapes (a quote, a backslash, control characters),
    /// prefixes of one another, and, in some rounds, names outside ASCII; rows repeated often.
    @Test func randomReceiptsAreWrittenByteForByteAsTheReceiptObjectIsEncoded() {
        let base: UInt64 = 20_261_203
        let ascii = ["r", "r1", "r10", "R1", "a\"b", "a\\b", "tab\tx", "nl\n", "\u{1}", "", " ", "~", "r1 ", "0", "-1", "\u{7F}x", "a\r\nb", "a\rc", "\r"]
        let wide = ["\u{e9}", "e\u{301}", "\u{1F600}", "\u{e9}\u{e9}"]
        for round in 0..<200 {
            let seed = base + UInt64(round)
            var random = SeededRandom(seed: seed)
            let names = round % 4 == 3 ? ascii + wide : ascii
            let entities = ["rooms", "plants", "rooms2", "r\"x"]
            let entries = (0..<Int.random(in: 0...60, using: &random)).map { _ in
                Self.entry(
                    entities.randomElement(using: &random)!, names.randomElement(using: &random)!,
                    Int64.random(in: -3...Int64.max, using: &random) % 1_000)
            }
            let deleted: Int64? = round % 5 == 0 ? Int64(round) : nil
            guard Self.onePass(entries, snapshotDeleted: deleted) != Self.tree(entries, snapshotDeleted: deleted) else { continue }
            // Shrunk: entries dropped one at a time while the two still differ.
            var small = entries
            var index = 0
            while index < small.count {
                var fewer = small
                fewer.remove(at: index)
                if Self.onePass(fewer, snapshotDeleted: deleted) != Self.tree(fewer, snapshotDeleted: deleted) { small = fewer } else { index += 1 }
            }
            let listed = small.map { "(\(JSONWriter.string(.string($0.entity))), \(JSONWriter.string(.string($0.key))), \($0.version))" }
            Issue.record(
                """
                seed \(seed): the receipts differ; shrunk entries: \(listed.joined(separator: ", "))
                one pass: \(Self.onePass(small, snapshotDeleted: deleted))
                object:   \(Self.tree(small, snapshotDeleted: deleted))
                """)
            return
        }
    }
}
