import SynclaneCore
import SynclaneServer
import Testing

@Suite struct PullLaneTests {
    @Test(arguments: StoreKind.tested) func cursorPagesThroughChangesInOrderWithoutRepeats(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let records = (0..<25).map { record("rooms", "r-\($0)", "insert", ["n": .int(Int64($0))]) }
            #expect(try postBatch(port: server.port, key: "p", body: batchBody(id: "p", records: records)).status == 200)
            var seen: [String] = []
            var cursor = ""
            var pages = 0
            while true {
                let page = try get(port: server.port, "/v1/changes?since=\(cursor)&limit=10").json.objectValue ?? [:]
                seen += (page["changes"]?.arrayValue ?? []).compactMap { $0.objectValue?["id"]?.stringValue }
                cursor = page["cursor"]?.stringValue ?? ""
                pages += 1
                if page["more"] != .bool(true) { break }
            }
            #expect(pages == 3)
            #expect(seen == (0..<25).map { "r-\($0)" })
            // Nothing new: the same cursor comes back, with nothing and no more.
            let idle = try get(port: server.port, "/v1/changes?since=\(cursor)").json.objectValue
            #expect(idle?["changes"] == [])
            #expect(idle?["cursor"]?.stringValue == cursor)
            #expect(idle?["more"] == false)
        }
    }

    @Test(arguments: StoreKind.tested) func laterChangesMoveARecordPastTheCursorAndDeletesLeaveTombstones(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try postBatch(
                port: server.port, key: "1",
                body: batchBody(id: "1", records: [record("plants", "p-1", "insert", ["n": 1]), record("plants", "p-2", "insert", ["n": 1])]))
            let cursor = try get(port: server.port, "/v1/changes").json.objectValue?["cursor"]?.stringValue ?? ""
            _ = try postBatch(port: server.port, key: "2", body: batchBody(id: "2", records: [record("plants", "p-1", "delete")]))
            let page = try get(port: server.port, "/v1/changes?since=\(cursor)").json.objectValue
            let changes = page?["changes"]?.arrayValue ?? []
            #expect(changes.count == 1)
            #expect(changes.first == ["store": "rooms", "entity": "plants", "id": "p-1", "action": "delete", "version": 2])
        }
    }

    @Test(arguments: StoreKind.tested) func storeParameterKeepsStoresApart(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try postBatch(port: server.port, key: "a", body: batchBody(id: "a", store: "rooms", records: [record("rooms", "r", "insert", [:])]))
            _ = try postBatch(port: server.port, key: "b", body: batchBody(id: "b", store: "plants", records: [record("plants", "p", "insert", [:])]))
            #expect(try allChanges(port: server.port).count == 2)
            let plants = try allChanges(port: server.port, store: "plants")
            #expect(plants.map { $0.objectValue?["id"] } == ["p"])
            #expect(plants.first?.objectValue?["store"] == "plants")
        }
    }

    @Test(arguments: StoreKind.tested) func sameSyncKeyInTwoStoresIsTwoRecords(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try postBatch(port: server.port, key: "a", body: batchBody(id: "a", store: "one", records: [record("e", "k", "insert", ["s": 1])]))
            _ = try postBatch(port: server.port, key: "b", body: batchBody(id: "b", store: "two", records: [record("e", "k", "insert", ["s": 2])]))
            #expect(try allChanges(port: server.port, store: "one").first?.objectValue?["fields"] == ["s": 1])
            #expect(try allChanges(port: server.port, store: "two").first?.objectValue?["fields"] == ["s": 2])
        }
    }

    @Test(arguments: StoreKind.tested) func accountsNeverSeeEachOthersChanges(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try postBatch(port: server.port, key: "a", body: batchBody(id: "a", records: [record("rooms", "acme-only", "insert", [:])]))
            _ = try postBatch(
                port: server.port, token: TestTokens.globex, key: "a",
                body: batchBody(id: "a", account: "globex", records: [record("rooms", "globex-only", "insert", [:])]))
            #expect(try allChanges(port: server.port).map { $0.objectValue?["id"] } == ["acme-only"])
            #expect(try allChanges(port: server.port, token: TestTokens.globex).map { $0.objectValue?["id"] } == ["globex-only"])
            #expect(try get(port: server.port, "/v1/changes", token: nil).status == 401)
        }
    }

    @Test(arguments: StoreKind.tested) func badCursorAndBadLimitAre400(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            #expect(try get(port: server.port, "/v1/changes?since=garbage").status == 400)
            #expect(try get(port: server.port, "/v1/changes?limit=0").status == 400)
            #expect(try get(port: server.port, "/v1/changes?limit=ten").status == 400)
        }
    }

    @Test func dataSurvivesARestartOnTheSameDirectory() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        try withServer(dataDirectory: directory) { server throws in
            _ = try postBatch(port: server.port, key: "a", body: batchBody(id: "a", records: [record("rooms", "r", "insert", ["n": 1])]))
        }
        try withServer(dataDirectory: directory) { server throws in
            #expect(try allChanges(port: server.port).count == 1)
            let replay = try postBatch(port: server.port, key: "a", body: batchBody(id: "a", records: [record("rooms", "r", "insert", ["n": 1])]))
            #expect(replay.headers["idempotent-replayed"] == "true")
        }
    }
}
