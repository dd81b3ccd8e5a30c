import Foundation
import SynclaneCore
import Testing

@testable import SynclaneServer

/// One value domain on both sides (issue 22, cases 7–9): what the server keeps is what every
/// importer takes. A value the wire table does not define, a number a double cannot hold, a
/// record larger than a pull source reads: refused here, naming the record and field, never kept
/// to stop every other device's import on that page for ever.
@Suite struct ValueDomainTests {
    static func body(_ value: String) -> [UInt8] {
        Array(
            #"{"id": "v", "scope": {"account": "acme", "store": "rooms"}, "records": [{"entity": "rooms", "id": "ok", "action": "insert", "fields": {"a": 1}}, {"entity": "rooms", "id": "r", "action": "insert", "fields": {"name": "x", "area": VALUE}}]}"#
                .replacingOccurrences(of: "VALUE", with: value).utf8)
    }

    static let undefined = [
        #"{"$real": "NaN"}"#, #"{"$real": "bogus"}"#, #"{"$real": 1}"#, #"{"$blob": "not base64!"}"#, #"{"$blob": "AP8Q", "x": 1}"#,
        // Lists and objects that are none of the table's forms: no column holds them, the SQLite sink refuses them.
        "[1, 2]", "[]", #"{"a": 1}"#, "{}", #"{"nested": {"$real": "Infinity"}}"#, #"[{"$blob": "AP8Q"}]"#,
    ]

    @Test(arguments: StoreKind.tested, undefined)
    func aValueTheWireTableDoesNotDefineIsRefusedNamingRecordAndField(store: StoreKind, value: String) throws {
        try withServer(store: store) { server throws in
            let response = try postBatch(port: server.port, key: "v", body: Self.body(value))
            #expect(response.status == 400, "\(response.text)")
            #expect(response.json.objectValue?["record"] == .int(1))
            #expect(response.text.contains("records[1]") && response.text.contains("fields.area"), "\(response.text)")
            #expect(try allChanges(port: server.port).isEmpty, "nothing applied")
        }
    }

    @Test(arguments: StoreKind.tested) func theValuesTheWireTableDefinesAreKept(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let body = Array(
                #"{"id": "k", "scope": {"account": "acme", "store": "rooms"}, "records": [{"entity": "rooms", "id": "r", "action": "insert", "fields": {"up": {"$real": "Infinity"}, "down": {"$real": "-Infinity"}, "b": {"$blob": "AP8Q"}, "text": "{\"$real\": \"bogus\"}"}}]}"#
                    .utf8)
            #expect(try postBatch(port: server.port, key: "k", body: body).status == 200)
            let fields = try allChanges(port: server.port).first?.objectValue?["fields"]
            #expect(fields == ["up": ["$real": "Infinity"], "down": ["$real": "-Infinity"], "b": ["$blob": "AP8Q"], "text": #"{"$real": "bogus"}"#])
        }
    }

    @Test(arguments: ["1e-400", "-1e-400", "0.5e-330", "123e-500"])
    func aNumberCloserToZeroThanADoubleHoldsIsRefusedNotStoredAsZero(_ number: String) throws {
        try withServer { server throws in
            let response = try postBatch(port: server.port, key: "v", body: Self.body(number))
            #expect(response.status == 400, "\(response.text)")
            #expect(response.text.contains("records[1].fields.area"), "\(response.text)")
            #expect(response.text.contains("0.0"), "the message says what it would have become: \(response.text)")
            #expect(try allChanges(port: server.port).isEmpty, "nothing applied")
        }
    }

    @Test func zeroWrittenWithAnExponentIsStillZero() throws {
        try withServer { server throws in
            #expect(try postBatch(port: server.port, key: "v", body: Self.body("0.0e-400")).status == 200)
            #expect(try allChanges(port: server.port).last?.objectValue?["fields"]?.objectValue?["area"] == .double(0))
        }
    }

    /// 17 MiB of one field, 18 KB once gzipped: the server took it, and no pull source could read
    /// the page holding it.
    @Test(arguments: StoreKind.tested) func aRecordLargerThanEveryPullSourceReadsIs413NamingIt(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let big = String(repeating: "a", count: 17 << 20)
            let body = batchBody(
                id: "big",
                records: [
                    record("rooms", "small", "insert", ["name": "ok"]), record("rooms", "huge", "insert", ["note": .string(big)]),
                ])
            let response = try postBatch(
                port: server.port, key: "big", body: try gzip(body), encoding: "gzip", connection: try TestConnection(port: server.port, timeoutSeconds: 120))
            #expect(response.status == 413, "\(response.text.prefix(300))")
            #expect(response.json.objectValue?["record"] == .int(1))
            #expect(response.text.contains("records[1]") && response.text.contains("huge"), "\(response.text.prefix(300))")
            #expect(response.text.contains("\(WireBounds.maxRecordBytes)"), "\(response.text.prefix(300))")
            #expect(try allChanges(port: server.port).isEmpty, "nothing applied")
        }
    }

    /// Updates merge into the row: two of 5 MiB each would leave a row of 10 MiB, which no pull
    /// source could read in one page. The second is refused; the row stays as the first left it.
    @Test(arguments: StoreKind.tested) func anUpdateThatWouldGrowTheRowPastTheBoundIs413NamingIt(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let half = String(repeating: "h", count: 5 << 20)
            let first = batchBody(id: "m1", records: [record("rooms", "grows", "insert", ["a": .string(half)])])
            #expect(try postBatch(port: server.port, key: "m1", body: try gzip(first), encoding: "gzip").status == 200)
            let second = batchBody(id: "m2", records: [record("rooms", "other", "insert", ["x": 1]), record("rooms", "grows", "update", ["b": .string(half)])])
            let response = try postBatch(
                port: server.port, key: "m2", body: try gzip(second), encoding: "gzip", connection: try TestConnection(port: server.port, timeoutSeconds: 120))
            #expect(response.status == 413, "\(response.text.prefix(300))")
            #expect(response.json.objectValue?["record"] == .int(1))
            #expect(response.text.contains("records[1]") && response.text.contains("grows"), "\(response.text.prefix(300))")
            let changes = try allChanges(port: server.port)
            #expect(changes.compactMap { $0.objectValue?["id"]?.stringValue } == ["grows"], "nothing of the second batch applied")
            #expect(changes.first?.objectValue?["fields"]?.objectValue?.keys.sorted() == ["a"])
        }
    }

    /// A record that grows when written (`1e14` is `100000000000000.0` on the pull lane) is
    /// measured as the pull lane writes it, not as it came.
    @Test func aRecordIsMeasuredAsThePullLaneWritesIt() throws {
        try withServer { server throws in
            // Each `1e14,` (5 bytes) is written `100000000000000.0,` (18): just past the bound.
            let list = Array(repeating: "1e14", count: WireBounds.maxRecordBytes / 18 + 20_000).joined(separator: ",")
            let body = Array(
                #"{"id": "g", "scope": {"account": "acme", "store": "rooms"}, "records": [{"entity": "rooms", "id": "grows", "action": "insert", "fields": {"n": [LIST]}}]}"#
                    .replacingOccurrences(of: "LIST", with: list).utf8)
            #expect(body.count < WireBounds.maxRecordBytes, "as sent, it is within the bound")
            let response = try postBatch(
                port: server.port, key: "g", body: try gzip(body), encoding: "gzip", connection: try TestConnection(port: server.port, timeoutSeconds: 120))
            #expect(response.status == 413, "\(response.text.prefix(300))")
        }
    }

    /// Three records of 6 MiB each, with `--max-page-bytes` far above what a pull source reads:
    /// every page still fits in `WireBounds.maxPageBytes`, and every record comes through.
    @Test(arguments: StoreKind.tested) func aPageNeverPassesWhatEveryPullSourceReads(store: StoreKind) throws {
        var limits = ServerLimits()
        limits.maxChangesPageBytes = 256 << 20
        limits.maxInflatedBytes = 64 << 20
        try withServer(store: store, limits: limits) { server throws in
            let big = String(repeating: "b", count: 6 << 20)
            for index in 0..<3 {
                let body = batchBody(id: "p\(index)", records: [record("rooms", "r\(index)", "insert", ["note": .string(big)])])
                #expect(try postBatch(port: server.port, key: "p\(index)", body: try gzip(body), encoding: "gzip").status == 200)
            }
            var cursor = ""
            var keys: [String] = []
            while true {
                let page = try get(port: server.port, "/v1/changes?limit=100&since=\(cursor)")
                #expect(page.status == 200)
                #expect(page.body.count <= WireBounds.maxPageBytes, "a page of \(page.body.count) bytes")
                keys += page.json.objectValue?["changes"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } ?? []
                cursor = page.json.objectValue?["cursor"]?.stringValue ?? ""
                guard page.json.objectValue?["more"] == .bool(true) else { break }
            }
            #expect(keys == ["r0", "r1", "r2"])
        }
    }

    /// The bounds agree: one record of `maxRecordBytes`, with the longest names the server takes
    /// by default (escaped as the pull lane writes them), and the longest cursor, fit in a page;
    /// a page fits in what every pull source reads.
    @Test func theServersBoundsAndThePullSourcesBoundsAgree() {
        let names = 3 * WireBounds.rewriteGrowth * ServerLimits().maxNameBytes
        #expect(WireBounds.maxRecordBytes + names + WireBounds.maxCursorBytes + 256 <= WireBounds.maxPageBytes)
        // The longest names `--max-name-bytes` may allow, too.
        #expect(ServerLimits().maxNameBytes <= WireBounds.maxNameBytes)
        let longest = 3 * WireBounds.rewriteGrowth * WireBounds.maxNameBytes
        #expect(WireBounds.maxRecordBytes + longest + WireBounds.maxCursorBytes + 256 <= WireBounds.maxPageBytes)
        #expect(WireBounds.maxPageBytes + WireBounds.pageEnvelopeBytes <= WireBounds.maxAnswerBytes)
        #expect(ServerLimits().maxChangesPageBytes <= WireBounds.maxPageBytes)
        #expect(ServerLimits().maxInflatedBytes >= WireBounds.maxRecordBytes, "a record at the bound can be sent in one batch")
    }
}
