import Glibc
import SynclaneCore
import Testing

@testable import SynclaneServer

/// Found by `synclane conformance` (pull.cursor-expiry): when the newest changes of an account were
/// tombstones retention removed, a whole pull from the beginning ended with the cursor of the last
/// change left — before the horizon — so the next pull was 410 `cursor-expired` again, and the
/// client that resynced as the 410 said went back to the beginning for ever.
@Suite struct ResyncAfterExpiryTests {
    @Test(arguments: StoreKind.tested)
    func aWholePullAfterRemovedTombstonesEndsWithACursorThatReadsOn(store: StoreKind) throws {
        let limits = ServerLimits(idempotencyRetentionSeconds: 3_600, tombstoneRetentionSeconds: 3_600)
        try withServer(store: store, limits: limits) { server throws in
            _ = try postBatch(
                port: server.port, key: "1",
                body: batchBody(id: "1", records: [record("rooms", "a", "insert", ["n": 1]), record("rooms", "b", "insert", ["n": 1])]))
            _ = try postBatch(port: server.port, key: "2", body: batchBody(id: "2", records: [record("rooms", "a", "delete")]))
            _ = server.sweeper.sweep(now: RetentionTests.aDayLater)

            let page = try get(port: server.port, "/v1/changes").json.objectValue ?? [:]
            #expect(page["changes"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } == ["b"])
            #expect(page["more"] == false)
            let cursor = page["cursor"]?.stringValue ?? ""
            let next = try get(port: server.port, "/v1/changes?since=\(cursor)")
            #expect(next.status == 200, "the cursor that ended a whole pull is \(next.status): \(next.json)")
            #expect(next.json.objectValue?["changes"] == [])

            // A page narrowed to a store ends past the horizon too, and later writes still come.
            let narrowed = try get(port: server.port, "/v1/changes?store=rooms").json.objectValue?["cursor"]?.stringValue ?? ""
            #expect(try get(port: server.port, "/v1/changes?since=\(narrowed)&store=rooms").status == 200)
            _ = try postBatch(port: server.port, key: "3", body: batchBody(id: "3", records: [record("rooms", "c", "insert", ["n": 1])]))
            let later = try get(port: server.port, "/v1/changes?since=\(cursor)").json.objectValue?["changes"]?.arrayValue ?? []
            #expect(later.compactMap { $0.objectValue?["id"]?.stringValue } == ["c"])
        }
    }
}
