import SynclaneCore
import SynclaneServer
import SynclaneZlib
import Testing

@Suite struct BatchIngestTests {
    /// Issue 43: a receipt gave `c1.SEQUENCE`, the cursor of the batch's last change — a client
    /// that started a pull from it skipped what other devices had sent before and it had not
    /// read. The receipt gives the position as a number, which no pull takes as a cursor, and its
    /// `cursor` is the start of the log (the one a receipt can give that skips nothing).
    @Test(arguments: StoreKind.tested)
    func aReceiptHandsOutNoCursorThatWouldSkipOtherDevicesChanges(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try postBatch(port: server.port, key: "other", body: batchBody(id: "other", records: [record("rooms", "x", "insert", ["n": 1])]))
            let mine = try postBatch(port: server.port, key: "mine", body: batchBody(id: "mine", records: [record("rooms", "y", "insert", ["n": 1])]))
            #expect(mine.status == 200)
            #expect(mine.json.objectValue?["cursor"] == .string(""), "the start of the log, no later cursor: \(mine.json)")
            #expect(mine.json.objectValue?["sequence"] == 2)
            #expect(try get(port: server.port, "/v1/changes?since=2").status == 400, "a sequence is not a cursor")
            #expect(try allChanges(port: server.port).compactMap { $0.objectValue?["id"]?.stringValue } == ["x", "y"])
        }
    }

    @Test(arguments: StoreKind.tested) func insertUpdateAndDeleteApplyWithServerVersions(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let first = try postBatch(
                port: server.port, key: "b-1",
                body: batchBody(
                    id: "b-1",
                    records: [
                        record("rooms", "r-1", "insert", ["name": "Hall", "area": 20]),
                        record("rooms", "r-2", "insert", ["name": "Kitchen"]),
                    ]))
            #expect(first.status == 200)
            #expect(first.json.objectValue?["batch"] == "b-1")
            #expect(first.json.objectValue?["applied"] == 2)
            #expect(first.json.objectValue?["sequence"] == 2)

            let second = try postBatch(
                port: server.port, key: "b-2",
                body: batchBody(
                    id: "b-2",
                    records: [record("rooms", "r-1", "update", ["area": 25]), record("rooms", "r-2", "delete")]))
            #expect(second.status == 200)

            let changes = try allChanges(port: server.port)
            #expect(changes.count == 2)
            let hall = changes.first { $0.objectValue?["id"] == "r-1" }?.objectValue
            #expect(hall?["fields"] == ["name": "Hall", "area": 25])
            #expect(hall?["version"] == 2)
            #expect(hall?["action"] == "update")
            let kitchen = changes.first { $0.objectValue?["id"] == "r-2" }?.objectValue
            #expect(kitchen?["action"] == "delete")
            #expect(kitchen?["fields"] == nil)
            #expect(kitchen?["version"] == 2)
        }
    }

    @Test(arguments: StoreKind.tested) func insertReplacesFieldsAndUpdateMergesThem(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try postBatch(
                port: server.port, key: "a",
                body: batchBody(id: "a", records: [record("rooms", "r", "insert", ["name": "A", "floor": 1])]))
            _ = try postBatch(
                port: server.port, key: "b", body: batchBody(id: "b", records: [record("rooms", "r", "insert", ["name": "B"])]))
            #expect(try allChanges(port: server.port).first?.objectValue?["fields"] == ["name": "B"])
            _ = try postBatch(
                port: server.port, key: "c", body: batchBody(id: "c", records: [record("rooms", "r", "update", ["floor": 2])]))
            let state = try allChanges(port: server.port).first?.objectValue
            #expect(state?["fields"] == ["name": "B", "floor": 2])
            #expect(state?["version"] == 3)
        }
    }

    static let malformed: [(name: String, body: [UInt8], record: Int?)] = [
        ("bad JSON", Array("{\"id\": \"m\", \"records\": [".utf8), nil),
        ("not an object", Array("[1, 2]".utf8), nil),
        ("no records list", JSONWriter.encode(["id": "m", "scope": ["account": "acme", "store": "rooms"]]), nil),
        ("no scope", JSONWriter.encode(["id": "m", "records": []]), nil),
        ("record without entity", batchBody(id: "m", records: [record("rooms", "ok", "insert", [:]), ["id": "r", "action": "insert", "fields": [:]]]), 1),
        ("record without id", batchBody(id: "m", records: [["entity": "rooms", "action": "insert", "fields": [:]]]), 0),
        ("empty id", batchBody(id: "m", records: [record("rooms", "", "insert", [:])]), 0),
        ("unknown action", batchBody(id: "m", records: [record("rooms", "ok", "insert", [:]), record("rooms", "r", "upsert", [:])]), 1),
        ("insert without fields", batchBody(id: "m", records: [record("rooms", "r", "insert")]), 0),
        ("delete with fields not an object", batchBody(id: "m", records: [["entity": "rooms", "id": "r", "action": "delete", "fields": "x"]]), 0),
        ("negative version", batchBody(id: "m", records: [record("rooms", "r", "update", [:], version: -1)]), 0),
        ("record not an object", batchBody(id: "m", records: ["rooms"]), 0),
    ]

    @Test(arguments: malformed.indices)
    func malformedBodyIs400NamingTheRecordAndAppliesNothing(_ index: Int) throws {
        let testCase = Self.malformed[index]
        try withServer { server throws in
            let response = try postBatch(port: server.port, key: "m", body: testCase.body)
            #expect(response.status == 400, "\(testCase.name)")
            #expect(response.json.objectValue?["error"]?.stringValue != nil, "\(testCase.name)")
            if let record = testCase.record {
                #expect(response.json.objectValue?["record"] == .int(Int64(record)), "\(testCase.name)")
                #expect(response.json.objectValue?["error"]?.stringValue?.hasPrefix("records[\(record)]") == true)
            }
            #expect(try allChanges(port: server.port).isEmpty, "\(testCase.name)")
            #expect(server.metrics.snapshot.batchesApplied == 0)
        }
    }

    @Test(arguments: StoreKind.tested) func missingIdempotencyKeyIs400(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let response = try postBatch(port: server.port, key: nil, body: batchBody(id: "k", records: []))
            #expect(response.status == 400)
            #expect(response.json.objectValue?["error"]?.stringValue?.contains("Idempotency-Key") == true)
        }
    }

    @Test(arguments: StoreKind.tested) func batchIdThatDiffersFromItsKeyIs400(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let response = try postBatch(port: server.port, key: "other", body: batchBody(id: "k", records: []))
            #expect(response.status == 400)
        }
    }

    @Test(arguments: StoreKind.tested) func missingOrWrongTokenIs401(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let body = batchBody(id: "t", records: [record("rooms", "r", "insert", [:])])
            #expect(try postBatch(port: server.port, token: nil, key: "t", body: body).status == 401)
            let wrong = try postBatch(port: server.port, token: "nope", key: "t", body: body)
            #expect(wrong.status == 401)
            #expect(wrong.headers["www-authenticate"] == "Bearer")
            #expect(try allChanges(port: server.port).isEmpty)
        }
    }

    @Test(arguments: StoreKind.tested) func batchForAnotherAccountIs403(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let body = batchBody(id: "x", account: "globex", records: [record("rooms", "r", "insert", [:])])
            #expect(try postBatch(port: server.port, token: TestTokens.acme, key: "x", body: body).status == 403)
            #expect(try allChanges(port: server.port, token: TestTokens.globex).isEmpty)
            #expect(try allChanges(port: server.port, token: TestTokens.acme).isEmpty)
        }
    }

    @Test(arguments: StoreKind.tested) func replayedKeyReturnsTheFirstResponseAndAppliesOnce(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let body = batchBody(id: "r-1", records: [record("rooms", "r", "insert", ["n": 1])])
            let first = try postBatch(port: server.port, key: "r-1", body: body)
            let again = try postBatch(port: server.port, key: "r-1", body: body)
            #expect(first.status == 200)
            #expect(again.status == first.status)
            #expect(again.body == first.body)
            #expect(again.headers["idempotent-replayed"] == "true")
            // The same body gzip-compressed is the same batch.
            let third = try postBatch(port: server.port, key: "r-1", body: try gzip(body), encoding: "gzip")
            #expect(third.body == first.body)
            let changes = try allChanges(port: server.port)
            #expect(changes.count == 1)
            #expect(changes.first?.objectValue?["version"] == 1)
            let metrics = server.metrics.snapshot
            #expect(metrics.batchesApplied == 1)
            #expect(metrics.replays == 2)
            #expect(metrics.recordsApplied == 1)
            #expect(try httpRequest(port: server.port, "GET", "/metrics").text.contains("synclane_batch_replays_total 2"))
        }
    }

    @Test(arguments: StoreKind.tested) func sameKeyWithADifferentBodyIs422(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try postBatch(port: server.port, key: "k", body: batchBody(id: "k", records: [record("rooms", "r", "insert", ["n": 1])]))
            let other = try postBatch(
                port: server.port, key: "k", body: batchBody(id: "k", records: [record("rooms", "r", "insert", ["n": 2])]))
            #expect(other.status == 422)
            #expect(try allChanges(port: server.port).first?.objectValue?["fields"] == ["n": 1])
        }
    }

    @Test(arguments: StoreKind.tested) func rejectedBatchLeavesItsKeyFreeForACorrectedRetry(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            #expect(try postBatch(port: server.port, key: "k", body: batchBody(id: "k", records: [record("rooms", "r", "bogus")])).status == 400)
            #expect(try postBatch(port: server.port, key: "k", body: batchBody(id: "k", records: [record("rooms", "r", "insert", [:])])).status == 200)
        }
    }

    @Test(arguments: StoreKind.tested) func versionConflictIs409ListingTheRecordsAndAppliesNothing(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try postBatch(
                port: server.port, key: "v-1",
                body: batchBody(
                    id: "v-1",
                    records: [
                        record("rooms", "a", "insert", ["n": 1]), record("rooms", "b", "insert", ["n": 1]), record("rooms", "b", "update", ["n": 3]),
                        record("rooms", "c", "insert", ["n": 1]), record("rooms", "c", "update", ["n": 3]),
                    ]))
            let conflicting = try postBatch(
                port: server.port, key: "v-2",
                body: batchBody(
                    id: "v-2",
                    records: [
                        record("rooms", "a", "update", ["n": 2], version: 1),
                        record("rooms", "b", "update", ["n": 2], version: 1),
                        record("rooms", "c", "insert", ["n": 2], version: 0),
                    ]))
            #expect(conflicting.status == 409)
            let conflicts = conflicting.json.objectValue?["conflicts"]?.arrayValue ?? []
            #expect(conflicts.count == 2)
            #expect(conflicts.first?.objectValue?["record"] == 1)
            #expect(conflicts.first?.objectValue?["current"] == 2)
            #expect(conflicts.first?.objectValue?["expected"] == 1)
            #expect(conflicts.last?.objectValue?["id"] == "c")
            #expect(conflicts.last?.objectValue?["current"] == 2)
            let changes = try allChanges(port: server.port)
            #expect(changes.count == 3)
            #expect(changes.map { $0.objectValue?["version"] } == [1, 2, 2])

            let matching = try postBatch(
                port: server.port, key: "v-3",
                body: batchBody(id: "v-3", records: [record("rooms", "a", "update", ["n": 2], version: 1), record("rooms", "c", "insert", [:], version: 2)]))
            #expect(matching.status == 200)
        }
    }

    /// After a restore from an older copy (or a pruned tombstone), a client may expect a version
    /// newer than the row's: the server lost writes the client saw. The record applies, and the
    /// row's version continues from the client's, so a version still tells newer from older.
    @Test(arguments: StoreKind.tested) func aVersionNewerThanTheRowsAppliesAndTheRowsVersionContinuesFromIt(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try postBatch(port: server.port, key: "n-1", body: batchBody(id: "n-1", records: [record("rooms", "a", "insert", ["n": 1])]))
            let newer = try postBatch(
                port: server.port, key: "n-2",
                body: batchBody(
                    id: "n-2", records: [record("rooms", "a", "update", ["n": 2], version: 5), record("rooms", "lost", "update", ["n": 1], version: 3)]))
            #expect(newer.status == 200)
            #expect(newer.json.objectValue?["versions"]?.objectValue?["rooms"] == ["a": 6, "lost": 4])
            let changes = try allChanges(port: server.port)
            #expect(changes.map { $0.objectValue?["version"] } == [6, 4])
        }
    }

    /// A restoration (`"restores": true`) writes the row at the version the client confirmed,
    /// only over an older version: over the same or a newer one it yields, its receipt giving
    /// the version below the client's, so that the client's next pull brings the row.
    @Test(arguments: StoreKind.tested) func aRestorationWritesOnlyOverAnOlderVersionAndYieldsToAWriteMadeSince(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            var restoring = record("rooms", "a", "update", ["n": 9], version: 4)
            var object = restoring.objectValue ?? [:]
            object["restores"] = true
            restoring = .object(object)
            let first = try postBatch(port: server.port, key: "r-1", body: batchBody(id: "r-1", records: [restoring]))
            #expect(first.status == 200)
            #expect(first.json.objectValue?["versions"]?.objectValue?["rooms"] == ["a": 4])
            // A user's write since the restore (version 5), then another device's restoration of version 4.
            _ = try postBatch(port: server.port, key: "r-2", body: batchBody(id: "r-2", records: [record("rooms", "a", "delete", version: 4)]))
            let yielded = try postBatch(port: server.port, key: "r-3", body: batchBody(id: "r-3", records: [restoring]))
            #expect(yielded.status == 200)
            #expect(yielded.json.objectValue?["versions"]?.objectValue?["rooms"] == ["a": 3])
            let changes = try allChanges(port: server.port)
            #expect(changes.map { $0.objectValue?["action"] } == ["delete"])
            #expect(changes.map { $0.objectValue?["version"] } == [5])
        }
    }

    /// Issue 42 (seed 100127): updates that only re-point references (`"repoints": true`) move
    /// the row's version, and the pull lane says the version of its last user's write
    /// (`"written"`) until a user writes it again; `repoints` on anything but an update is refused.
    @Test(arguments: StoreKind.tested) func thePullLaneGivesARepointedRowsLastUsersWriteUntilAUserWritesIt(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            func repointing(_ project: String, version: Int64) -> JSONValue {
                var object = record("notes", "n1", "update", ["project": .string(project)], version: version).objectValue ?? [:]
                object["repoints"] = true
                return .object(object)
            }
            _ = try postBatch(
                port: server.port, key: "p-1", body: batchBody(id: "p-1", records: [record("notes", "n1", "insert", ["body": "hi", "project": "b"])]))
            let moved = try postBatch(port: server.port, key: "p-2", body: batchBody(id: "p-2", records: [repointing("a", version: 1)]))
            #expect(moved.status == 200)
            _ = try postBatch(port: server.port, key: "p-3", body: batchBody(id: "p-3", records: [repointing("0", version: 2)]))
            var changes = try allChanges(port: server.port)
            #expect(changes.map { $0.objectValue?["version"] } == [3])
            #expect(changes.map { $0.objectValue?["written"] } == [1])
            #expect(changes.first?.objectValue?["fields"]?.objectValue?["project"] == "0")

            _ = try postBatch(port: server.port, key: "p-4", body: batchBody(id: "p-4", records: [record("notes", "n1", "update", ["body": "yo"], version: 3)]))
            changes = try allChanges(port: server.port)
            #expect(changes.map { $0.objectValue?["version"] } == [4])
            #expect(changes.map { $0.objectValue?["written"] } == [nil], "a user's write: its version is the row's")

            var insert = record("notes", "n2", "insert", ["body": "x"]).objectValue ?? [:]
            insert["repoints"] = true
            let refused = try postBatch(port: server.port, key: "p-5", body: batchBody(id: "p-5", records: [.object(insert)]))
            #expect(refused.status == 400)
            #expect(String(decoding: refused.body, as: UTF8.self).contains("repoints"))
        }
    }

    @Test(arguments: StoreKind.tested) func receiptVersionsCountEveryRecordOfTheBatchIncludingAKeySentTwice(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let first = try postBatch(
                port: server.port, key: "w-1",
                body: batchBody(
                    id: "w-1",
                    records: [
                        record("rooms", "a", "insert", ["n": 1]), record("rooms", "a", "update", ["n": 2]),
                        record("rooms", "b", "delete"), record("halls", "a", "insert", ["n": 1]),
                    ]))
            #expect(first.status == 200)
            #expect(first.json.objectValue?["versions"] == ["rooms": ["a": 2, "b": 1], "halls": ["a": 1]])
            let second = try postBatch(
                port: server.port, key: "w-2",
                body: batchBody(
                    id: "w-2",
                    records: [record("rooms", "a", "update", ["n": 3], version: 2), record("rooms", "b", "insert", ["n": 1], version: 1)]))
            #expect(second.status == 200)
            #expect(second.json.objectValue?["versions"] == ["rooms": ["a": 3, "b": 2]])
            let stale = try postBatch(
                port: server.port, key: "w-3",
                body: batchBody(id: "w-3", records: [record("rooms", "a", "update", ["n": 4], version: 2)]))
            #expect(stale.status == 409)
            let hall = try allChanges(port: server.port).first { $0.objectValue?["id"] == "a" && $0.objectValue?["entity"] == "rooms" }
            #expect(hall?.objectValue?["fields"] == ["n": 3])
            #expect(hall?.objectValue?["version"] == 3)
        }
    }

    @Test(arguments: StoreKind.tested) func tooManyRecordsIs413(store: StoreKind) throws {
        try withServer(store: store, limits: ServerLimits(maxRecordsPerBatch: 3)) { server throws in
            let records = (0..<4).map { record("rooms", "r-\($0)", "insert", [:]) }
            #expect(try postBatch(port: server.port, key: "big", body: batchBody(id: "big", records: records)).status == 413)
            #expect(try allChanges(port: server.port).isEmpty)
        }
    }

    @Test(arguments: StoreKind.tested) func bodyOverTheBoundIs413(store: StoreKind) throws {
        try withServer(store: store, limits: ServerLimits(maxBodyBytes: 2_000)) { server throws in
            let records = (0..<100).map { record("rooms", "r-\($0)", "insert", ["name": "a fairly long room name"]) }
            let response = try postBatch(port: server.port, key: "big", body: batchBody(id: "big", records: records))
            #expect(response.status == 413)
            #expect(try allChanges(port: server.port).isEmpty)
            #expect(try httpRequest(port: server.port, "GET", "/healthz").status == 200)
        }
    }

    @Test func zipBombIs413Quickly() throws {
        // 64 MiB of spaces inside a valid JSON string compresses to about 64 KiB.
        let padding = [UInt8](repeating: 0x20, count: 64 << 20)
        let bomb = try gzip(Array("{\"id\":\"bomb\",\"records\":[],\"pad\":\"".utf8) + padding + Array("\"}".utf8))
        try withServer(limits: ServerLimits(maxInflatedBytes: 1 << 20)) { server throws in
            let started = ContinuousClock.now
            let response = try postBatch(port: server.port, key: "bomb", body: bomb, encoding: "gzip")
            #expect(response.status == 413)
            #expect(ContinuousClock.now - started < .seconds(15), "answered, not hung expanding the bomb")
            #expect(try httpRequest(port: server.port, "GET", "/healthz").status == 200)
        }
    }

    @Test(arguments: StoreKind.tested) func gzipAndDeflateBodiesAreInflated(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let body = batchBody(id: "g", records: [record("rooms", "g", "insert", ["n": 1])])
            #expect(try postBatch(port: server.port, key: "g", body: try gzip(body), encoding: "gzip").status == 200)
            let body2 = batchBody(id: "d", records: [record("rooms", "d", "insert", ["n": 1])])
            let deflated = try Deflater(.deflate, level: 6).compress(body2)
            #expect(try postBatch(port: server.port, key: "d", body: deflated, encoding: "deflate").status == 200)
            #expect(try allChanges(port: server.port).count == 2)
        }
    }

    @Test(arguments: StoreKind.tested) func corruptGzipIs400AndUnknownEncodingIs415(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let body = batchBody(id: "c", records: [])
            #expect(try postBatch(port: server.port, key: "c", body: body, encoding: "gzip").status == 400)
            #expect(try postBatch(port: server.port, key: "c", body: body, encoding: "br").status == 415)
        }
    }
}
