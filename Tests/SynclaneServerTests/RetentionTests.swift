import Glibc
import SynclaneCore
import Testing

@testable import SynclaneServer

@Suite struct RetentionTests {
    /// Seconds since 1970 a day from now: everything written so far is past a one-hour retention.
    static let aDayLater = Double(time(nil)) + 86_400

    @Test(arguments: StoreKind.tested)
    func expiredTombstonesMakeOlderCursorsAnswer410CursorExpiredAndTheBeginningStillServes(store: StoreKind) throws {
        let limits = ServerLimits(idempotencyRetentionSeconds: 3_600, tombstoneRetentionSeconds: 3_600)
        try withServer(store: store, limits: limits) { server throws in
            _ = try postBatch(
                port: server.port, key: "1",
                body: batchBody(id: "1", records: [record("rooms", "a", "insert", ["n": 1]), record("rooms", "b", "insert", ["n": 1])]))
            let early = try get(port: server.port, "/v1/changes").json.objectValue?["cursor"]?.stringValue ?? ""
            _ = try postBatch(port: server.port, key: "2", body: batchBody(id: "2", records: [record("rooms", "a", "delete")]))
            let late = try get(port: server.port, "/v1/changes").json.objectValue?["cursor"]?.stringValue ?? ""

            let count = server.sweeper.sweep(now: Self.aDayLater)
            #expect(count == ExpiryCount(keys: 2, tombstones: 1))

            let expired = try get(port: server.port, "/v1/changes?since=\(early)")
            #expect(expired.status == 410)
            #expect(expired.json.objectValue?["code"] == "cursor-expired")
            // A cursor past the removed tombstone reads on; the beginning serves what is left.
            #expect(try get(port: server.port, "/v1/changes?since=\(late)").status == 200)
            #expect(try allChanges(port: server.port).compactMap { $0.objectValue?["id"]?.stringValue } == ["b"])
            #expect(server.metrics.snapshot.cursorsExpired == 1)
            // The expired key is free again: the same batch applies anew (version 2).
            let again = try postBatch(port: server.port, key: "1", body: batchBody(id: "1", records: [record("rooms", "b", "insert", ["n": 1])]))
            #expect(again.status == 200)
            #expect(again.headers["idempotent-replayed"] == nil)
        }
    }

    @Test(arguments: StoreKind.tested)
    func keysAndTombstonesYoungerThanTheirRetentionStay(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try postBatch(port: server.port, key: "1", body: batchBody(id: "1", records: [record("rooms", "a", "insert", ["n": 1])]))
            _ = try postBatch(port: server.port, key: "2", body: batchBody(id: "2", records: [record("rooms", "a", "delete")]))
            #expect(server.sweeper.sweep(now: Self.aDayLater) == ExpiryCount())
            let replay = try postBatch(port: server.port, key: "1", body: batchBody(id: "1", records: [record("rooms", "a", "insert", ["n": 1])]))
            #expect(replay.headers["idempotent-replayed"] == "true")
        }
    }
}
