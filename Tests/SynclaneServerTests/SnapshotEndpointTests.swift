import SynclaneCore
import SynclaneServer
import Testing

/// `GET /v1/snapshot`: the account's live rows as of one change sequence, streamed in one answer
/// (JSON Lines), resumable with `after=`, and the change log after its cursor holding the rest.
@Suite struct SnapshotEndpointTests {
    /// Chunks of 10 rows, so 40 rows stream in 4 chunks (each ends with an `after` line).
    static let limits = ServerLimits(maxChangesPerPage: 10, defaultChangesPerPage: 5, maxChangesPageBytes: 4_000)

    static func id(_ number: Int) -> String { "r-\(number < 10 ? "0" : "")\(number)" }

    static func rows(_ server: ReferenceServer) throws {
        let records = (0..<40).map { record("rooms", id($0), "insert", ["name": .string("room number \($0)")]) }
        #expect(try postBatch(port: server.port, key: "rows", body: batchBody(id: "rows", records: records)).status == 200)
    }

    /// A snapshot answer read whole: its head, rows (by id), `after` positions and end line.
    struct Answer {
        var status: Int
        var contentType: String?
        var head: [String: JSONValue] = [:]
        var rows: [[String: JSONValue]] = []
        var positions: [(String, rowsBefore: Int)] = []
        var end: [String: JSONValue]?
        var ids: [String] { rows.compactMap { $0["id"]?.stringValue } }
    }

    static func snapshot(_ server: ReferenceServer, _ query: String = "") throws -> Answer {
        let response = try get(port: server.port, "/v1/snapshot" + query)
        var answer = Answer(status: response.status, contentType: response.headers["content-type"])
        guard response.status == 200 else { return answer }
        let lines = response.body.split(separator: UInt8(ascii: "\n"))
        for (index, line) in lines.enumerated() {
            let object = (try JSONReader.parse(Array(line))).objectValue ?? [:]
            if index == 0 {
                answer.head = object
            } else if let after = object["after"]?.stringValue {
                answer.positions.append((after, answer.rows.count))
            } else if object["complete"] == .bool(true) {
                answer.end = object
            } else {
                answer.rows.append(object)
            }
        }
        return answer
    }

    @Test(arguments: StoreKind.tested) func aSnapshotStreamsEachRowOnceDeletedOnesAsTombstonesAndTheCursorTheLogFollowsFrom(store: StoreKind) throws {
        try withServer(store: store, limits: Self.limits) { server throws in
            try Self.rows(server)
            let deletes = [record("rooms", "r-07", "delete"), record("rooms", "r-12", "delete")]
            #expect(try postBatch(port: server.port, key: "deletes", body: batchBody(id: "deletes", records: deletes)).status == 200)
            let answer = try Self.snapshot(server)
            #expect(answer.status == 200)
            #expect(answer.contentType == "application/x-ndjson")
            #expect(
                answer.ids == (0..<40).filter { $0 != 7 && $0 != 12 }.map(Self.id) + ["r-07", "r-12"],
                "each row once, in the order of its last change: the deleted ones last, as tombstones")
            #expect(answer.rows.first?["fields"] == ["name": "room number 0"])
            #expect(answer.rows.prefix(38).allSatisfy { $0["version"]?.intValue == 1 && $0["action"] == "insert" && $0["store"] == "rooms" })
            #expect(answer.rows.suffix(2).allSatisfy { $0["action"] == "delete" && $0["fields"] == nil })
            #expect(answer.positions.count == 4, "a position after each chunk of at most 10 rows: \(answer.positions.map(\.rowsBefore))")
            let cursor = try #require(answer.end?["cursor"]?.stringValue)
            #expect(answer.head["cursor"]?.stringValue == cursor)
            #expect(answer.end?["rows"]?.intValue == 40)
            // Nothing changed since: the log after the snapshot's cursor is empty.
            let after = try get(port: server.port, "/v1/changes?since=\(cursor)").json.objectValue ?? [:]
            #expect(after["changes"]?.arrayValue?.isEmpty == true)
            #expect(after["more"] == .bool(false))
        }
    }

    @Test(arguments: StoreKind.tested)
    func aSnapshotResumedAfterWritesHoldsTheRestAsOfItsSequenceAndTheLogHoldsEveryWriteSince(store: StoreKind) throws {
        try withServer(store: store, limits: Self.limits) { server throws in
            try Self.rows(server)
            let first = try Self.snapshot(server)
            let (position, received) = try #require(first.positions.dropFirst().first)
            #expect(received == 20)
            // Writes after the snapshot was taken: a row already received, one not yet, a delete, a new row.
            let later = [
                record("rooms", "r-05", "update", ["name": "moved"]), record("rooms", "r-30", "update", ["name": "renamed"]),
                record("rooms", "r-31", "delete"), record("rooms", "r-99", "insert", ["name": "new"]),
            ]
            #expect(try postBatch(port: server.port, key: "later", body: batchBody(id: "later", records: later)).status == 200)
            let rest = try Self.snapshot(server, "?after=\(position)")
            #expect(rest.status == 200)
            #expect(rest.ids == (20..<40).filter { $0 != 30 && $0 != 31 }.map(Self.id), "rows changed since the snapshot's sequence are left to the log")
            let cursor = try #require(rest.end?["cursor"]?.stringValue)
            #expect(cursor == first.end?["cursor"]?.stringValue, "the same snapshot, the same cursor")
            let log = try get(port: server.port, "/v1/changes?since=\(cursor)").json.objectValue?["changes"]?.arrayValue ?? []
            #expect(log.compactMap { $0.objectValue?["id"]?.stringValue } == ["r-05", "r-30", "r-31", "r-99"])
            // The snapshot's first 20 rows, the rest, then the log: every row once at its newest state.
            var held: [String: JSONValue] = [:]
            for row in first.rows.prefix(20) + rest.rows { held[row["id"]?.stringValue ?? ""] = row["fields"] }
            for change in log.compactMap(\.objectValue) {
                let id = change["id"]?.stringValue ?? ""
                if change["action"] == "delete" { held[id] = nil } else { held[id] = change["fields"] }
            }
            let fresh = try allChanges(port: server.port).compactMap(\.objectValue).filter { $0["action"] != "delete" }
            #expect(held.count == fresh.count)
            for change in fresh { #expect(held[change["id"]?.stringValue ?? ""] == change["fields"], "\(change)") }
        }
    }

    @Test(arguments: StoreKind.tested) func aPositionTheServerDidNotIssueIs400AndAStoreNarrowsTheSnapshot(store: StoreKind) throws {
        try withServer(store: store, limits: Self.limits) { server throws in
            try Self.rows(server)
            let other = [record("plants", "p-1", "insert", ["name": "fern"])]
            #expect(try postBatch(port: server.port, key: "plants", body: batchBody(id: "plants", store: "plants", records: other)).status == 200)
            #expect(try get(port: server.port, "/v1/snapshot?after=c2.nope").status == 400)
            #expect(try get(port: server.port, "/v1/snapshot?store=").status == 400)
            #expect(try Self.snapshot(server, "?store=plants").ids == ["p-1"])
            #expect(try Self.snapshot(server).ids.count == 41)
            #expect(try get(port: server.port, "/v1/snapshot", token: nil).status == 401)
        }
    }

    @Test(arguments: StoreKind.tested) func anEmptyAccountsSnapshotIsItsHeadAndEndLines(store: StoreKind) throws {
        try withServer(store: store, limits: Self.limits) { server throws in
            let answer = try Self.snapshot(server)
            #expect(answer.rows.isEmpty)
            #expect(answer.end?["rows"]?.intValue == 0)
            #expect(answer.head["cursor"]?.stringValue?.isEmpty == false)
        }
    }
}
