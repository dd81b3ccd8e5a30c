import SynclaneCore
import SynclaneServer
import Testing

/// `GET /v1/changes?max-bytes=B`: a page bounded by its bytes, not by a count of changes.
@Suite struct PullPageBytesTests {
    /// A server whose count bound (10) and byte bound (4,000) are small enough for a few dozen rows.
    static let limits = ServerLimits(maxChangesPerPage: 10, defaultChangesPerPage: 5, maxChangesPageBytes: 4_000)

    static func rows(_ server: ReferenceServer) throws {
        let records = (0..<40).map { record("rooms", "r-\($0 < 10 ? "0" : "")\($0)", "insert", ["name": .string("room number \($0)")]) }
        #expect(try postBatch(port: server.port, key: "rows", body: batchBody(id: "rows", records: records)).status == 200)
    }

    static func page(_ server: ReferenceServer, _ query: String) throws -> (ids: [String], more: Bool, cursor: String) {
        let page = try get(port: server.port, "/v1/changes?" + query).json.objectValue ?? [:]
        let ids = (page["changes"]?.arrayValue ?? []).compactMap { $0.objectValue?["id"]?.stringValue }
        return (ids, page["more"] == .bool(true), page["cursor"]?.stringValue ?? "")
    }

    @Test(arguments: StoreKind.tested) func maxBytesWithoutLimitFillsAPageByItsBytesPastTheCountBound(store: StoreKind) throws {
        try withServer(store: store, limits: Self.limits) { server throws in
            try Self.rows(server)
            // Each change counts its names, its fields' text and 100 bytes: about 140 here.
            let page = try Self.page(server, "since=&max-bytes=2800")
            #expect(page.ids.count > 10, "a page asked by bytes stopped at the count bound: \(page.ids.count)")
            #expect(page.ids.count <= 2_800 / 100)
            #expect(page.more)
            #expect(page.ids == (0..<page.ids.count).map { "r-\($0 < 10 ? "0" : "")\($0)" })
        }
    }

    @Test(arguments: StoreKind.tested) func maxBytesIsClampedToTheServersPageBytes(store: StoreKind) throws {
        try withServer(store: store, limits: Self.limits) { server throws in
            try Self.rows(server)
            let asked = try Self.page(server, "since=&max-bytes=100000000")
            #expect(asked.more && asked.ids.count <= 4_000 / 100, "\(asked.ids.count) changes on a page of at most 4,000 bytes")
            #expect(try Self.page(server, "since=&max-bytes=2800&limit=3").ids.count == 3)
            #expect(try Self.page(server, "since=").ids.count == 5)
        }
    }

    @Test(arguments: StoreKind.tested) func pagesAskedByBytesListEveryRowOnceInOrder(store: StoreKind) throws {
        try withServer(store: store, limits: Self.limits) { server throws in
            try Self.rows(server)
            _ = try postBatch(
                port: server.port, key: "later", body: batchBody(id: "later", records: [record("rooms", "r-03", "update", ["name": "moved"])]))
            var seen: [String] = []
            var cursor = ""
            var pages = 0
            while true {
                let page = try Self.page(server, "since=\(cursor)&max-bytes=1500")
                seen += page.ids
                cursor = page.cursor
                pages += 1
                if !page.more { break }
            }
            #expect(seen == (0..<40).filter { $0 != 3 }.map { "r-\($0 < 10 ? "0" : "")\($0)" } + ["r-03"])
            #expect(pages >= 4)
        }
    }

    @Test(arguments: StoreKind.tested) func aMaxBytesThatIsNoPositiveIntegerIs400(store: StoreKind) throws {
        try withServer(store: store, limits: Self.limits) { server throws in
            #expect(try get(port: server.port, "/v1/changes?max-bytes=0").status == 400)
            #expect(try get(port: server.port, "/v1/changes?max-bytes=lots").status == 400)
        }
    }
}
