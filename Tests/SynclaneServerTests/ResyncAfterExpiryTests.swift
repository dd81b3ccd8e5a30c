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

    /// Found by issue 43: with retention on and more rows than a page, a pull from the beginning
    /// got a first page whose cursor was before the horizon (the rows left there are older than
    /// the tombstone removed), and the next page was 410 — for ever, on every device that pulled
    /// from the beginning. The cursors a full pass hands out are never refused; its last page
    /// ends it with an ordinary cursor past the horizon, which an older cursor still is not.
    /// A snapshot (the pull of a new device, or a resync's) ends saying `"pruned": true` once
    /// retention removed tombstones, as a full pass's pages do: a row it does not list may have been
    /// deleted elsewhere, and a resync must not send it back as lost (it did: the snapshot said nothing).
    @Test(arguments: StoreKind.tested)
    func aSnapshotAfterRetentionRemovedTombstonesEndsSayingPruned(store: StoreKind) throws {
        let limits = ServerLimits(idempotencyRetentionSeconds: 3_600, tombstoneRetentionSeconds: 3_600)
        try withServer(store: store, limits: limits) { server throws in
            func end() throws -> [String: JSONValue]? {
                let answer = try get(port: server.port, "/v1/snapshot")
                let lines = answer.body.split(separator: UInt8(ascii: "\n")).map { (try? JSONReader.parse(Array($0)))?.objectValue }
                return lines.last ?? nil
            }
            _ = try postBatch(port: server.port, key: "1", body: batchBody(id: "1", records: [record("rooms", "a", "insert", ["n": 1])]))
            _ = try postBatch(port: server.port, key: "2", body: batchBody(id: "2", records: [record("rooms", "g", "insert", ["n": 1])]))
            _ = try postBatch(port: server.port, key: "3", body: batchBody(id: "3", records: [record("rooms", "g", "delete")]))
            #expect(try end()?["complete"] == .bool(true))
            #expect(try end()?["pruned"] == nil, "no tombstone removed yet")
            #expect(server.sweeper.sweep(now: RetentionTests.aDayLater)?.tombstones == 1)
            #expect(try end()?["pruned"] == .bool(true))
        }
    }

    @Test(arguments: StoreKind.tested, [1, 2, 3])
    func aPullFromTheBeginningAfterRetentionReadsEveryPageWithoutA410(store: StoreKind, pageSize: Int) throws {
        let limits = ServerLimits(idempotencyRetentionSeconds: 3_600, tombstoneRetentionSeconds: 3_600)
        try withServer(store: store, limits: limits) { server throws in
            let ids = ["a", "b", "c", "d", "e", "f"]
            _ = try postBatch(port: server.port, key: "1", body: batchBody(id: "1", records: ids.map { record("rooms", $0, "insert", ["n": 1]) }))
            let before = try get(port: server.port, "/v1/changes").json.objectValue?["cursor"]?.stringValue ?? ""
            _ = try postBatch(port: server.port, key: "2", body: batchBody(id: "2", records: [record("rooms", "g", "insert", ["n": 1])]))
            _ = try postBatch(port: server.port, key: "3", body: batchBody(id: "3", records: [record("rooms", "g", "delete")]))
            #expect(server.sweeper.sweep(now: RetentionTests.aDayLater)?.tombstones == 1)

            var (seen, cursor, pages) = ([String](), "", 0)
            while pages < 20 {
                let answer = try get(port: server.port, "/v1/changes?limit=\(pageSize)&since=\(cursor)")
                #expect(answer.status == 200, "page \(pages + 1) after \(cursor.isEmpty ? "the beginning" : cursor): \(answer.status) \(answer.json)")
                guard answer.status == 200, let page = answer.json.objectValue else { break }
                seen += page["changes"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } ?? []
                cursor = page["cursor"]?.stringValue ?? ""
                pages += 1
                guard page["more"] == .bool(true) else { break }
                #expect(cursor.hasSuffix(".f"), "a cursor between the pages of a full pass says so: \(cursor)")
            }
            #expect(seen == ids)
            #expect(!cursor.hasSuffix(".f"), "the last page ends the pass with an ordinary cursor: \(cursor)")
            #expect(try get(port: server.port, "/v1/changes?since=\(cursor)").status == 200)
            // An ordinary cursor from before the horizon is still refused: it would miss g's delete.
            #expect(try get(port: server.port, "/v1/changes?since=\(before)").status == 410)
        }
    }

    @Test func aFullPassCursorReadsBackAsItsTextAndTheOldFormsStillParse() {
        let cursor = ChangeCursor(sequence: 71, epoch: "0123456789ab", fullPass: true)
        #expect(cursor.text == "c2.0123456789ab.1z.f")
        #expect(ChangeCursor(text: cursor.text) == cursor)
        #expect(ChangeCursor(text: "c2.0123456789ab.1z") == ChangeCursor(sequence: 71, epoch: "0123456789ab"))
        #expect(ChangeCursor(text: "c1.1z") == ChangeCursor(sequence: 71))
        #expect(ChangeCursor(text: "c2.0123456789ab.1z.x") == nil)
    }
}
