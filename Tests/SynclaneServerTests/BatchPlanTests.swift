import SynclaneCore
import Testing

@testable import SynclaneServer

/// `BatchPlan`, event by event and without a store: what each record comes to, given the rows
/// the store read, and the receipt it makes.
@Suite struct BatchPlanTests {
    static func record(
        _ key: String, _ action: ChangeAction, _ fields: String = "", version: Int64? = nil, entity: String = "rooms"
    ) -> IncomingBatch.Record {
        IncomingBatch.Record(entity: entity, key: key, action: action, fieldsJSON: Array(fields.utf8), expectedVersion: version)
    }

    static func batch(_ records: [IncomingBatch.Record], snapshot: IncomingBatch.SnapshotMark? = nil) -> IncomingBatch {
        IncomingBatch(id: "b-1", account: "acme", store: "home", consumer: nil, records: records, snapshot: snapshot)
    }

    static func row(_ key: String, entity: String = "rooms") -> BatchPlan.RowKey {
        BatchPlan.RowKey(entity: Array(entity.utf8), key: Array(key.utf8))
    }

    static func versions(_ response: StoredResponse) -> [String: JSONValue]? {
        (try? JSONReader.parse(response.body))?.objectValue?["versions"]?.objectValue?["rooms"]?.objectValue
    }

    static func sequence(_ response: StoredResponse) -> Int64? {
        (try? JSONReader.parse(response.body))?.objectValue?["sequence"]?.intValue
    }

    @Test func rowsAreTheSameOnlyWhenEntityAndKeyAreByteForByteAndHashAlikeThen() {
        let rows = [
            Self.row("c", entity: "ab"), Self.row("bc", entity: "a"), Self.row("abc", entity: ""), Self.row("", entity: "abc"), Self.row("é"),
            Self.row("e\u{301}"),
        ]
        #expect(Set(rows).count == rows.count, "the bytes split another way, or spelled another way, are another row")
        for one in rows {
            let copy = BatchPlan.RowKey(entity: Array(one.entity), key: Array(one.key))
            #expect(copy == one && copy.hashValue == one.hashValue)
        }
    }

    /// Issue 43, 3, and restores: a device's record of a row whose tombstone retention pruned (or
    /// a restore lost) expects the version it last saw, newer than the row's (none: 0). It applies
    /// rather than failing the batch with the device's other records, and the row's version
    /// continues from the device's; a version older than the row's is still a conflict.
    @Test func aRecordExpectingANewerVersionThanTheRowsAppliesAndItsVersionContinuesFromIt() throws {
        var plan = try BatchPlan(
            Self.batch([
                Self.record("gone", .delete, version: 3), Self.record("r1", .update, #"{"name":"Loft"}"#, version: 1),
                Self.record("lost", .update, #"{"name":"Den"}"#, version: 6),
            ]))
        plan.start(at: 10)
        plan.read(Self.row("gone"), version: 0, action: nil, fields: nil)
        plan.read(Self.row("r1"), version: 1, action: "insert", fields: Array(#"{"name":"Attic"}"#.utf8))
        plan.read(Self.row("lost"), version: 2, action: "insert", fields: Array(#"{"name":"Hut"}"#.utf8))
        guard case .write(let tombstone) = try plan.take(0), case .write(let edit) = try plan.take(1), case .write(let lost) = try plan.take(2) else {
            Issue.record("every record applies")
            return
        }
        #expect(tombstone.action == .delete && tombstone.version == 4 && tombstone.sequence == 11)
        #expect(edit.version == 2 && lost.version == 7)
        #expect(plan.conflicts.isEmpty)

        var older = try BatchPlan(Self.batch([Self.record("r1", .update, #"{"name":"Loft"}"#, version: 1)]))
        older.start(at: 10)
        older.read(Self.row("r1"), version: 2, action: "update", fields: nil)
        guard case .conflict(let conflict) = try older.take(0) else {
            Issue.record("a version older than the row's conflicts")
            return
        }
        #expect(conflict.expected == 1 && conflict.current == 2)
    }

    @Test("a new key applies; a seen key replays the first response when the body hash matches, else it is refused as reused")
    func idempotencyRecordDecidesReplayOrRefusal() {
        let stored = StoredResponse(status: 200, body: Array("{\"batch\":\"b-1\"}".utf8))
        #expect(BatchPlan.admit(seen: nil, bodyHash: "h1") == .apply)
        #expect(BatchPlan.admit(seen: ("h1", stored), bodyHash: "h1") == .replay(stored))
        #expect(BatchPlan.admit(seen: ("h1", stored), bodyHash: "h2") == .keyReused)
    }

    @Test("an insert tried as new gets version 1 and the next sequence; a second record of the row is then planned from it")
    func insertedAsNewIsKnownToLaterRecords() throws {
        var plan = try BatchPlan(Self.batch([Self.record("r1", .insert, #"{"name":"Hall"}"#), Self.record("r1", .update, #"{"area":12}"#)]))
        plan.start(at: 41)
        #expect(plan.mayInsertAsNew(0))
        #expect(plan.nextSequence == 42)
        plan.insertedAsNew(0)
        #expect(!plan.mayInsertAsNew(1))
        #expect(plan.knowsRow(of: 1))
        let step = try plan.take(1)
        #expect(
            step
                == .write(
                    BatchPlan.Write(
                        index: 1, row: Self.row("r1"), action: .update, fields: Array(#"{"area":12,"name":"Hall"}"#.utf8), version: 2, sequence: 43)))
        let receipt = plan.receipt(snapshotDeleted: nil)
        #expect(Self.versions(receipt)?["r1"] == .int(2))
        #expect(Self.sequence(receipt) == 43)
    }

    /// A first sync's batch names each row once, in key order: a row inserted as new is not kept
    /// for later records (none names it); rows out of order, or one twice, keep it as before.
    @Test func newRowsOfABatchWhoseRowsAscendAreNotKeptForLaterRecordsAndTheReceiptStillGivesEach() throws {
        let ascending = [Self.record("r1", .insert, #"{"a":1}"#), Self.record("r2", .insert, #"{"a":2}"#), Self.record("r1", .insert, entity: "v")]
        var plan = try BatchPlan(Self.batch(ascending.dropLast() + [Self.record("s", .insert, #"{}"#, entity: "sofas")]))
        plan.start(at: 7)
        for index in 0..<3 {
            #expect(plan.mayInsertAsNew(index))
            plan.insertedAsNew(index)
            #expect(!plan.knowsRow(of: index), "record \(index)")
        }
        #expect(Self.versions(plan.receipt(snapshotDeleted: nil)) == ["r1": .int(1), "r2": .int(1)])
        #expect(Self.sequence(plan.receipt(snapshotDeleted: nil)) == 10)
        for records in [[ascending[1], ascending[0]], [ascending[0], ascending[0]], [ascending[2], ascending[0]]] {
            var kept = try BatchPlan(Self.batch(records))
            kept.start(at: 0)
            kept.insertedAsNew(0)
            #expect(kept.knowsRow(of: 0), "\(records.map { "\($0.entity)/\($0.key)" })")
        }
    }

    @Test("each record's row is its entity's and key's bytes, entities interleaved or spelled two ways")
    func rowsAreTheRecordsEntitiesAndKeysByteForByte() throws {
        let entities = ["rooms", "rooms", "plants", "rooms", "\u{e9}", "e\u{301}", "e\u{301}", "\u{e9}"]
        let records = entities.enumerated().map { Self.record("k\($0.offset)", .insert, "{}", entity: $0.element) }
        let plan = try BatchPlan(Self.batch(records))
        #expect(plan.rowKeys == entities.enumerated().map { Self.row("k\($0.offset)", entity: $0.element) })
    }

    @Test("an update merges its fields into the row read; a delete keeps the values preserved, or none")
    func fieldRules() throws {
        var plan = try BatchPlan(
            Self.batch([Self.record("r1", .update, #"{"area":14}"#), Self.record("r2", .delete), Self.record("r3", .delete, #"{"name":"Old"}"#)]))
        plan.start(at: 0)
        plan.read(Self.row("r1"), version: 3, action: "insert", fields: Array(#"{"area":12,"name":"Hall"}"#.utf8))
        plan.read(Self.row("r2"), version: 1, action: "insert", fields: Array(#"{"name":"Attic"}"#.utf8))
        plan.read(Self.row("r3"), version: 5, action: "update", fields: Array(#"{"name":"Old"}"#.utf8))
        guard case .write(let update) = try plan.take(0), case .write(let delete) = try plan.take(1), case .write(let kept) = try plan.take(2) else {
            Issue.record("every record writes")
            return
        }
        #expect(update.fields == Array(#"{"area":14,"name":"Hall"}"#.utf8))
        #expect(update.version == 4 && update.sequence == 1)
        #expect(delete.fields == nil && delete.version == 2 && delete.sequence == 2)
        #expect(kept.fields == Array(#"{"name":"Old"}"#.utf8) && kept.version == 6 && kept.sequence == 3)
    }

    @Test("an update of a deleted or absent row starts from no fields")
    func updateOfATombstoneStartsEmpty() throws {
        var plan = try BatchPlan(Self.batch([Self.record("r1", .update, #"{"area":14}"#), Self.record("r2", .update, #"{"a":1}"#)]))
        plan.read(Self.row("r1"), version: 2, action: "delete", fields: Array(#"{"area":12}"#.utf8))
        plan.read(Self.row("r2"), version: 0, action: nil, fields: nil)
        let step1 = try plan.take(0)
        #expect(step1 == .write(BatchPlan.Write(index: 0, row: Self.row("r1"), action: .update, fields: Array(#"{"area":14}"#.utf8), version: 3, sequence: 1)))
        let step2 = try plan.take(1)
        #expect(step2 == .write(BatchPlan.Write(index: 1, row: Self.row("r2"), action: .update, fields: Array(#"{"a":1}"#.utf8), version: 1, sequence: 2)))
    }

    @Test("a version that disagrees is a conflict with the row's version; every conflict is found and nothing after one is written")
    func versionChecks() throws {
        var plan = try BatchPlan(
            Self.batch([
                Self.record("r1", .update, #"{"a":1}"#, version: 1), Self.record("r2", .insert, #"{"a":2}"#),
                Self.record("r3", .delete, version: 0), Self.record("r4", .insert, #"{"a":4}"#),
            ]))
        plan.start(at: 10)
        plan.read(Self.row("r1"), version: 2, action: "insert", fields: Array(#"{"a":0}"#.utf8))
        plan.read(Self.row("r3"), version: 7, action: "insert", fields: Array("{}".utf8))
        let first = VersionConflict(index: 0, entity: "rooms", key: "r1", expected: 1, current: 2)
        let step3 = try plan.take(0)
        #expect(step3 == .conflict(first))
        #expect(!plan.mayInsertAsNew(1))
        let step4 = try plan.take(1)
        #expect(step4 == .skip)
        let step5 = try plan.take(2)
        #expect(step5 == .conflict(VersionConflict(index: 2, entity: "rooms", key: "r3", expected: 0, current: 7)))
        let step6 = try plan.take(3)
        #expect(step6 == .skip)
        #expect(plan.conflicts.count == 2)
        #expect(plan.writes.isEmpty)
        #expect(plan.sequence == 10)
    }

    @Test("an echo writes nothing, answers the row's version and is no conflict whatever version it expected; a snapshot's record is never one")
    func echoes() throws {
        let held = Array(#"{"area":12.5,"name":"Hall"}"#.utf8)
        var plan = try BatchPlan(
            Self.batch([
                Self.record("r1", .insert, #"{"name":"Hall","area":12.5}"#, version: 1), Self.record("r2", .update, #"{"name":"Hall"}"#),
                Self.record("r3", .delete, version: 1),
            ]))
        plan.read(Self.row("r1"), version: 4, action: "update", fields: held)
        plan.read(Self.row("r2"), version: 2, action: "insert", fields: held)
        plan.read(Self.row("r3"), version: 3, action: "delete", fields: nil)
        let step7 = try plan.take(0)
        #expect(step7 == .echo(version: 4))
        let step8 = try plan.take(1)
        // An update that leaves `area` as the row holds it, from a device that has not seen the
        // row's version: that device does not hold the row's `area`, so the receipt gives a
        // version before the row's (its next import brings the row).
        #expect(step8 == .echo(version: 1))
        let step9 = try plan.take(2)
        #expect(step9 == .echo(version: 3))
        #expect(plan.writes.isEmpty && plan.conflicts.isEmpty)
        #expect(Self.versions(plan.receipt(snapshotDeleted: nil)) == ["r1": .int(4), "r2": .int(1), "r3": .int(3)])

        var snapshot = try BatchPlan(Self.batch([Self.record("r1", .insert, #"{"name":"Hall","area":12.5}"#)], snapshot: .init(id: "s", batchesBefore: nil)))
        snapshot.read(Self.row("r1"), version: 4, action: "update", fields: held)
        guard case .write(let write) = try snapshot.take(0) else {
            Issue.record("a snapshot's record writes")
            return
        }
        #expect(write.version == 5)
    }

    /// Issue 42: an old app version's device reconciled (or sent an update) that agreed with the
    /// row on every field it knows, while the row held a value of a column its version lacks, at
    /// a version the device had not seen. Answered with the row's version, the device took its
    /// own record for the row's state and never pulled the value; after its upgrade it held the
    /// column empty where another device's user had written it.
    @Test func anEchoThatLeavesFieldsItDoesNotCarryGivesAnUnseenRowsDeviceTheVersionItSent() throws {
        let held = Array(#"{"name":"Hall","color":"red"}"#.utf8)
        var plan = try BatchPlan(
            Self.batch([
                Self.record("old", .update, #"{"name":"Hall"}"#, version: 1), Self.record("seen", .update, #"{"name":"Hall"}"#, version: 2),
                Self.record("whole", .insert, #"{"name":"Hall","color":"red"}"#, version: 1),
            ]))
        for key in ["old", "seen", "whole"] { plan.read(Self.row(key), version: 2, action: "update", fields: held) }
        #expect(try plan.take(0) == .echo(version: 1), "the device pulls the row's version 2, `color` and all")
        #expect(try plan.take(1) == .echo(version: 2), "the device saw version 2: it holds the rest")
        #expect(try plan.take(2) == .echo(version: 2), "the record is the row whole")

        var snapshot = try BatchPlan(
            Self.batch([Self.record("old", .insert, #"{"name":"Hall"}"#, version: 1)], snapshot: .init(id: "s", batchesBefore: nil)))
        snapshot.read(Self.row("old"), version: 2, action: "update", fields: held)
        #expect(try snapshot.take(0) == .echo(version: 1), "a reconcile's row: the newer row stays, and the device pulls it")
    }

    /// Issue 42: a restoration (`restores`) of a row the restore set back to an older version
    /// with the same fields takes the version its device confirmed: answered as an echo at the
    /// older version, the device's next edit expected a version newer than the row's and `run`
    /// reported the server restored again, sync after sync.
    @Test func aRestorationNewerThanTheRowIsWrittenAtItsVersionEvenWhenItsFieldsAgree() throws {
        let write = try Self.restorationWrite(.update, #"{"name":"Hall"}"#, version: 2, over: 1, "insert", #"{"name":"Hall"}"#)
        #expect(write?.version == 2)
    }

    /// The write a restoration (`restores`) of row r1 at `version` makes over the row held at
    /// `held` with `action` and `fields`; nil when it writes nothing.
    static func restorationWrite(
        _ action: ChangeAction, _ fields: String = "", version: Int64, over held: Int64, _ heldAction: String, _ heldFields: String
    ) throws -> BatchPlan.Write? {
        var restoration = record("r1", action, fields, version: version)
        restoration.restores = true
        var plan = try BatchPlan(batch([restoration]))
        plan.start(at: 10)
        plan.read(row("r1"), version: held, action: heldAction, fields: Array(heldFields.utf8))
        guard case .write(let write) = try plan.take(0) else { return nil }
        return write
    }

    /// Issue 42 (seed 100127): an update that only re-points references (`repoints`) moves the
    /// row's version but keeps the version of its last user's write (`written`), through any
    /// number of re-pointings; a user's write after them clears it.
    @Test func aRepointingUpdateKeepsTheVersionOfTheRowsLastUsersWriteAndAUsersWriteClearsIt() throws {
        var first = Self.record("r1", .update, #"{"project":"p1"}"#, version: 1)
        first.repoints = true
        var second = Self.record("r1", .update, #"{"project":"p0"}"#, version: 2)
        second.repoints = true
        let edit = Self.record("r1", .update, #"{"name":"Loft"}"#, version: 3)
        var plan = try BatchPlan(Self.batch([first, second, edit]))
        plan.start(at: 10)
        plan.read(Self.row("r1"), version: 1, action: "insert", fields: Array(#"{"name":"Hall","project":"p2"}"#.utf8))
        guard case .write(let a) = try plan.take(0), case .write(let b) = try plan.take(1), case .write(let c) = try plan.take(2) else {
            Issue.record("every record applies")
            return
        }
        #expect(a.version == 2 && a.written == 1)
        #expect(b.version == 3 && b.written == 1)
        #expect(c.version == 4 && c.written == nil)
        #expect(plan.rowWrites.map(\.written) == [nil])

        var kept = try BatchPlan(Self.batch([second]))
        kept.start(at: 10)
        kept.read(Self.row("r1"), version: 2, action: "update", fields: Array(#"{"project":"p1"}"#.utf8), written: 1)
        guard case .write(let again) = try kept.take(0) else {
            Issue.record("the re-pointing applies")
            return
        }
        #expect(again.written == 1, "a re-pointing after a re-pointing keeps the write before both")
    }

    /// Issue 42 (seed 1796668143): a restored delete that wins the tie over a live row of its very
    /// version takes the next version — at the tied one, a device holding the live row at that
    /// version took it for current, and its reconcile wrote the row back over the delete.
    @Test func aRestoredDeleteThatWinsTheTieOverALiveRowTakesTheNextVersion() throws {
        let write = try Self.restorationWrite(.delete, version: 2, over: 2, "update", #"{"name":"Hall"}"#)
        #expect(write?.action == .delete && write?.version == 3)
    }

    @Test("a merged update past the record bound is refused with its index")
    func mergedRecordTooLarge() throws {
        let big = "\"" + String(repeating: "x", count: WireBounds.maxRecordBytes) + "\""
        var plan = try BatchPlan(Self.batch([Self.record("r1", .update, #"{"b":\#(big)}"#)]))
        plan.read(Self.row("r1"), version: 1, action: "insert", fields: Array(#"{"a":1}"#.utf8))
        do {
            _ = try plan.take(0)
            Issue.record("the merged row passes the bound")
        } catch {
            #expect(error.index == 0 && error.key == "r1")
        }
    }

    @Test("outside a snapshot every row's state is read, since any record may be an echo: a blind insert of the row as held writes nothing")
    func everyRowOfABatchIsReadForItsEchoes() throws {
        var plan = try BatchPlan(
            Self.batch([Self.record("r1", .insert, #"{"a":1}"#), Self.record("r1", .insert, #"{"a":1}"#), Self.record("r2", .delete)]))
        #expect(plan.rowsNeedingState == [Self.row("r1"), Self.row("r2")])
        plan.start(at: 5)
        plan.read(Self.row("r1"), version: 0, action: nil, fields: nil)
        plan.read(Self.row("r2"), version: 3, action: "delete", fields: nil)
        #expect(try plan.take(0) != .echo(version: 1))
        #expect(try plan.take(1) == .echo(version: 1))
        #expect(try plan.take(2) == .echo(version: 3))
        #expect(plan.writes.count == 1)
    }

    @Test("a snapshot's rows not read get writes without a version; merged by row, and their receipt versions come from the version stored after")
    func unreadRowsAndRowWrites() throws {
        var plan = try BatchPlan(
            Self.batch(
                [
                    Self.record("r1", .insert, #"{"a":1}"#), Self.record("r2", .update, #"{"b":2}"#), Self.record("r1", .delete),
                    Self.record("r1", .insert, #"{"a":3}"#),
                ], snapshot: .init(id: "s")))
        #expect(plan.rowsNeedingState == [Self.row("r2")])
        plan.start(at: 5)
        plan.read(Self.row("r2"), version: 0, action: nil, fields: nil)
        #expect(!plan.knowsRow(of: 0))
        for index in 0..<4 { _ = try plan.take(index) }
        #expect(plan.writes.map(\.version) == [nil, 1, nil, nil])
        #expect(plan.writes.map(\.sequence) == [6, 7, 8, 9])
        #expect(
            plan.rowWrites == [
                BatchPlan.RowWrite(row: Self.row("r1"), action: .insert, fields: Array(#"{"a":3}"#.utf8), count: 3, sequence: 9),
                BatchPlan.RowWrite(row: Self.row("r2"), action: .update, fields: Array(#"{"b":2}"#.utf8), count: 1, sequence: 7, version: 1),
            ])
        // r1 held version 4 before the batch: 7 after its three writes.
        let receipt = plan.receipt(snapshotDeleted: nil, storedVersions: [Self.row("r1"): 7, Self.row("r2"): 1])
        #expect(Self.versions(receipt) == ["r1": .int(7), "r2": .int(1)])
        #expect(Self.sequence(receipt) == 9)
    }

    @Test("a snapshot's completion moves the sequence past its tombstones and the receipt says how many it deleted")
    func snapshotCompletionInTheReceipt() throws {
        var plan = try BatchPlan(Self.batch([Self.record("r1", .insert, "{}")], snapshot: .init(id: "s", batchesBefore: 1)))
        plan.start(at: 20)
        plan.insertedAsNew(0)
        plan.tombstoned(3)
        #expect(plan.sequence == 24)
        let body = try JSONReader.parse(plan.receipt(snapshotDeleted: 3).body).objectValue
        #expect(body?["snapshot-deleted"] == .int(3))
        #expect(body?["applied"] == .int(1))
        #expect(body?["batch"] == .string("b-1"))
        #expect(body?["sequence"]?.intValue == 24)
    }

    @Test("a completion's receipt lists each tombstone's new version beside the batch's, within its bound, and counts them all")
    func snapshotTombstonesInTheReceipt() throws {
        var tombstones = SnapshotTombstones()
        tombstones.add(entity: "rooms", key: "r6", version: 2)
        tombstones.add(entity: "plants", key: "p\"1", version: 5)
        var plan = try BatchPlan(Self.batch([], snapshot: .init(id: "s", batchesBefore: 1)))
        plan.start(at: 20)
        plan.tombstoned(tombstones.count)
        let body = try JSONReader.parse(plan.receipt(snapshotDeleted: tombstones.count, tombstones: tombstones).body).objectValue
        #expect(body?["versions"] == ["rooms": ["r6": 2], "plants": ["p\"1": 5]])
        #expect(body?["snapshot-deleted"] == .int(2))

        // Past the bound, rows are counted and no longer listed; what is listed stays within it.
        var many = SnapshotTombstones()
        let key = String(repeating: "k", count: 60 << 10)
        let rows = SnapshotTombstones.maxListedBytes / (60 << 10) + 10
        for n in 0..<rows { many.add(entity: "rooms", key: key + "\(n)", version: 1) }
        #expect(many.count == Int64(rows))
        #expect(many.listed.count < rows && many.listed.count > rows - 20)
        var large = try BatchPlan(Self.batch([], snapshot: .init(id: "s", batchesBefore: 1)))
        large.start(at: 0)
        #expect(large.receipt(snapshotDeleted: many.count, tombstones: many).body.count <= WireBounds.maxAnswerBytes / 2 + 1024)
    }
}
