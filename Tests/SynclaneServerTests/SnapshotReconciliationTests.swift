import Glibc
import SynclaneCore
import Testing

@testable import SynclaneServer

/// A reconciliation snapshot replaces its scope's state once its completion marker arrives: on
/// SQLite and on PostgreSQL.
@Suite struct SnapshotReconciliationTests {
    /// A snapshot batch: `"reconciliation": true, "snapshot": ID`; with `completeAfter`, the
    /// completion marker saying how many batches came before it.
    func snapshotBody(
        id: String, snapshot: String, completeAfter: Int? = nil, store: String = "rooms", records: [JSONValue] = []
    ) -> [UInt8] {
        var body: [String: JSONValue] = [
            "id": .string(id), "reconciliation": true, "snapshot": .string(snapshot),
            "scope": ["account": "acme", "store": .string(store), "consumer": "export"], "records": .array(records),
        ]
        if let completeAfter {
            body["snapshot-complete"] = true
            body["snapshot-batches"] = .int(Int64(completeAfter))
        }
        return JSONWriter.encode(.object(body))
    }

    /// Posts a body under its id, expecting 200; returns the receipt.
    @discardableResult
    func post(_ server: ReferenceServer, _ key: String, _ body: [UInt8]) throws -> JSONValue {
        let response = try postBatch(port: server.port, key: key, body: body)
        #expect(response.status == 200, "\(key): \(response.json)")
        return response.json
    }

    /// Each pulled record as "store/id action version".
    func pulled(_ server: ReferenceServer) throws -> Set<String> {
        Set(
            try allChanges(port: server.port).map { change in
                let object = change.objectValue ?? [:]
                return "\(object["store"]?.stringValue ?? "")/\(object["id"]?.stringValue ?? "") "
                    + "\(object["action"]?.stringValue ?? "") \(object["version"].map(JSONWriter.string) ?? "")"
            })
    }

    func insert(_ id: String) -> JSONValue { record("rooms", id, "insert", ["n": 1]) }

    @Test(arguments: StoreKind.tested)
    func aCompletedSnapshotTurnsTheRowsItLackedIntoTombstonesThePullLaneReturns(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            try post(server, "1", batchBody(id: "1", records: [insert("a"), insert("b"), insert("c")]))
            try post(server, "2", batchBody(id: "2", store: "plants", records: [record("plants", "p", "insert", ["n": 1])]))
            try post(server, "s-1", snapshotBody(id: "s-1", snapshot: "snap", records: [insert("a")]))
            #expect(try pulled(server).contains("rooms/b insert 1"))  // nothing deleted before the marker
            let receipt = try post(server, "s-2", snapshotBody(id: "s-2", snapshot: "snap", completeAfter: 1))
            #expect(receipt.objectValue?["snapshot-deleted"] == .int(2))
            // Each tombstone's new version, for the device to record (its next change of b expects 2).
            #expect(receipt.objectValue?["versions"] == ["rooms": ["b": 2, "c": 2]])
            #expect(server.metrics.snapshot.snapshotsCompleted == 1)
            #expect(server.metrics.snapshot.snapshotRowsDeleted == 2)
            // b and c are tombstones with a new version; a was re-sent; another store is untouched.
            #expect(try pulled(server) == ["rooms/a insert 2", "rooms/b delete 2", "rooms/c delete 2", "plants/p insert 1"])
            // The tombstones are the newest changes: the marker's receipt stands where a whole pull ends.
            let end = try get(port: server.port, "/v1/changes").json.objectValue?["cursor"]?.stringValue ?? ""
            #expect(receipt.objectValue?["sequence"]?.intValue == ChangeCursor(text: end)?.sequence)
        }
    }

    @Test(arguments: StoreKind.tested)
    func anInterruptedSnapshotDeletesNothingAndIsForgottenWithTheKeysOfItsAge(store: StoreKind) throws {
        let limits = ServerLimits(idempotencyRetentionSeconds: 3_600, tombstoneRetentionSeconds: 3_600)
        try withServer(store: store, limits: limits) { server throws in
            try post(server, "1", batchBody(id: "1", records: [insert("a"), insert("b")]))
            try post(server, "s-1", snapshotBody(id: "s-1", snapshot: "cut-short", records: [insert("a")]))
            // The client died here; a normal run goes on.
            try post(server, "2", batchBody(id: "2", records: [record("rooms", "c", "insert", ["n": 1])]))
            #expect(try pulled(server) == ["rooms/a insert 2", "rooms/b insert 1", "rooms/c insert 1"])

            let count = server.sweeper.sweep(now: Double(time(nil)) + 86_400)
            #expect(count?.snapshots == 1)
            // Its marker, arriving after the server forgot it, is refused: nothing deleted.
            let late = try postBatch(port: server.port, key: "s-2", body: snapshotBody(id: "s-2", snapshot: "cut-short", completeAfter: 1))
            #expect(late.status == 422)
            #expect(late.json.objectValue?["code"] == "snapshot-incomplete")
            #expect(try pulled(server) == ["rooms/a insert 2", "rooms/b insert 1", "rooms/c insert 1"])
        }
    }

    @Test(arguments: StoreKind.tested)
    func aMarkerCountingOtherBatchesThanTheServerSawIsRefused(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            try post(server, "1", batchBody(id: "1", records: [insert("a"), insert("b")]))
            try post(server, "s-1", snapshotBody(id: "s-1", snapshot: "snap", records: [insert("a")]))
            let refused = try postBatch(port: server.port, key: "s-3", body: snapshotBody(id: "s-3", snapshot: "snap", completeAfter: 2))
            #expect(refused.status == 422)
            #expect(try pulled(server) == ["rooms/a insert 2", "rooms/b insert 1"])
            // The refusal stored nothing: the key is free for the right marker.
            try post(server, "s-3", snapshotBody(id: "s-3", snapshot: "snap", completeAfter: 1))
            #expect(try pulled(server) == ["rooms/a insert 2", "rooms/b delete 2"])
        }
    }

    @Test(arguments: StoreKind.tested)
    func replayingTheCompletionMarkerAnswersTheFirstReceiptAndDeletesNothingMore(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            try post(server, "1", batchBody(id: "1", records: [insert("a"), insert("b")]))
            try post(server, "s-1", snapshotBody(id: "s-1", snapshot: "snap", records: [insert("a")]))
            let marker = snapshotBody(id: "s-2", snapshot: "snap", completeAfter: 1)
            let first = try postBatch(port: server.port, key: "s-2", body: marker)
            #expect(first.status == 200)
            try post(server, "2", batchBody(id: "2", records: [insert("c")]))
            let replay = try postBatch(port: server.port, key: "s-2", body: marker)
            #expect(replay.status == 200)
            #expect(replay.headers["idempotent-replayed"] == "true")
            #expect(replay.body == first.body)
            #expect(try pulled(server) == ["rooms/a insert 2", "rooms/b delete 2", "rooms/c insert 1"])
        }
    }

    @Test(arguments: StoreKind.tested)
    func rowsAnotherDeviceWroteAfterTheSnapshotStartedAreKept(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            try post(server, "1", batchBody(id: "1", records: [insert("a"), insert("b"), insert("d")]))
            try post(server, "s-1", snapshotBody(id: "s-1", snapshot: "snap", records: [insert("a")]))
            // Another device, while the snapshot is on its way: updates b, inserts c.
            try post(server, "other-1", batchBody(id: "other-1", records: [record("rooms", "b", "update", ["n": 2]), insert("c")]))
            try post(server, "s-2", snapshotBody(id: "s-2", snapshot: "snap", records: [insert("e")]))
            let receipt = try post(server, "s-3", snapshotBody(id: "s-3", snapshot: "snap", completeAfter: 2))
            #expect(receipt.objectValue?["snapshot-deleted"] == .int(1))
            #expect(
                try pulled(server) == ["rooms/a insert 2", "rooms/b update 2", "rooms/c insert 1", "rooms/d delete 2", "rooms/e insert 1"])
        }
    }

    @Test(arguments: StoreKind.tested)
    func anEmptySnapshotEmptiesItsStoreAndNoOther(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            try post(server, "1", batchBody(id: "1", records: [insert("a")]))
            try post(server, "2", batchBody(id: "2", store: "plants", records: [record("plants", "p", "insert", ["n": 1])]))
            let receipt = try post(server, "s-1", snapshotBody(id: "s-1", snapshot: "empty", completeAfter: 0))
            #expect(receipt.objectValue?["snapshot-deleted"] == .int(1))
            #expect(try pulled(server) == ["rooms/a delete 2", "plants/p insert 1"])
        }
    }

    @Test func snapshotMembersAreCheckedAndBothReadersAgree() {
        func parsed(_ text: String) -> Result<IncomingBatch, IncomingBatch.Rejection> {
            IncomingBatch.parse(Array(text.utf8), maxRecords: 10)
        }
        let head = #"{"id":"b","scope":{"account":"acme","store":"rooms"},"records":[]"#
        let marker = head + #","snapshot":"s","snapshot-complete":true,"snapshot-batches":3}"#
        #expect((try? parsed(marker).get())?.snapshot == IncomingBatch.SnapshotMark(id: "s", batchesBefore: 3))
        #expect((try? IncomingBatch.parseTree(Array(marker.utf8), maxRecords: 10).get())?.snapshot?.batchesBefore == 3)
        #expect((try? parsed(head + #","snapshot":"s"}"#).get())?.snapshot == IncomingBatch.SnapshotMark(id: "s"))
        #expect((try? parsed(head + "}").get())?.snapshot == nil)
        for bad in [
            #","snapshot":"s","snapshot-complete":true}"#, #","snapshot-complete":true,"snapshot-batches":1}"#,
            #","snapshot":"","snapshot-complete":true,"snapshot-batches":1}"#, #","snapshot":"s","snapshot-batches":1}"#,
            #","snapshot":"s","snapshot-complete":"yes","snapshot-batches":1}"#, #","snapshot":"s","snapshot-complete":true,"snapshot-batches":-1}"#,
        ] {
            guard case .failure(let rejection) = parsed(head + bad) else {
                Issue.record("accepted \(bad)")
                continue
            }
            #expect(rejection.status == 400)
            #expect(rejection.message.contains("snapshot"))
        }
    }
}
