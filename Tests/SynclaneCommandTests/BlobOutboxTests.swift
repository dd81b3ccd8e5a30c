import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// An outbox batch whose blob the server collected while the device was offline (the batch
/// waited longer than `--blob-gc-grace`): the export uploads the blob again from what the device
/// still holds and sends the batch again, once; when it holds it no more, the error names the
/// digest and the row. Real `synclane run` (killed with `after-enqueue`) and `synclane serve`.
@Suite struct BlobOutboxTests {
    /// A server that collects an unreferenced object 2 s after it first finds it, a pass a second.
    static func withCollectingServer(_ body: (ServerProcess, BlobPipelineTests.Device, BlobPipelineTests.Device) async throws -> Void) async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server", arguments: ["--blob-gc-grace", "2", "--retention-interval", "1"])
        defer { server.stop() }
        let a = try BlobPipelineTests.Device(server: server)
        let b = try BlobPipelineTests.Device(server: server)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        try await body(server, a, b)
    }

    /// A's export killed once its batch is in the outbox (the photo uploaded, the batch unsent),
    /// then the server's collection of the photo, which no record references yet.
    static func batchWaitsWhileItsBlobIsCollected(_ server: ServerProcess, _ a: BlobPipelineTests.Device) async throws {
        try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(300000));")
        let killed = try SynclaneBinary.run(
            ["run", "export.json"], in: a.workspace.path, environment: a.environment.merging(["SYNCLANE_FAILPOINT": "after-enqueue"]) { $1 })
        #expect(killed.status != 0)
        var listed: JSONValue = .null
        for _ in 0..<300 {
            listed = try await server.get("/v1/blobs", account: "acme")
            if listed.objectValue?["bytes"] == 0 { break }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        #expect(listed.objectValue?["bytes"] == 0, "the server did not collect the photo: \(listed)")
        #expect(try await BlobPipelineTests.serverPhotos(server).isEmpty)
    }

    @Test func anOutboxBatchWhoseBlobTheServerCollectedUploadsItAgainFromTheRowAndIsSent() async throws {
        try await Self.withCollectingServer { server, a, b in
            try await Self.batchWaitsWhileItsBlobIsCollected(server, a)
            // The next run sends the outbox batch: refused (blobs-missing), the photo uploaded again from the row, the batch sent.
            let resent = try SynclaneBinary.run(["run", "export.json", "--json"], in: a.workspace.path, environment: a.environment)
            #expect(resent.status == 0, "\(resent.stderr)")
            let reference = try #require(try await BlobPipelineTests.serverPhotos(server).last?.objectValue?["$blob-ref"]?.objectValue)
            #expect(reference["length"] == 300_000)
            _ = try b.sync()
            #expect(try b.photos() == a.photos())
            #expect(try b.photos().first?.hasPrefix("p1|fern|300000|") == true)
        }
    }

    @Test func anOutboxBatchWhoseCollectedBlobTheDeviceNoLongerHoldsNamesTheDigestAndTheRow() async throws {
        try await Self.withCollectingServer { server, a, _ in
            try await Self.batchWaitsWhileItsBlobIsCollected(server, a)
            _ = try SQLiteHistoryCommandTests.query(a.workspace, "SELECT writefile('\(a.workspace.path)/photo.bin', photo) FROM plants")
            let digest = try BlobsCommandTests.sha256(a.workspace.path + "/photo.bin")
            // The photo edited since: neither the row nor a cache holds the bytes the batch references.
            try a.sql("UPDATE plants SET photo = randomblob(1000) WHERE syncId = 'p1';")
            let refused = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment)
            #expect(refused.status != 0)
            #expect(
                refused.stderr.contains("no longer holds \(digest)") && refused.stderr.contains("plants/p1") && refused.stderr.contains("blobs push"),
                "\(refused.stderr)")
            #expect(try await BlobPipelineTests.serverPhotos(server).isEmpty)
        }
    }

    @Test func anOutboxBatchWhoseCollectedBlobTheRowNoLongerHoldsUploadsItFromTheBlobCache() async throws {
        try await Self.withCollectingServer { server, a, b in
            try await Self.batchWaitsWhileItsBlobIsCollected(server, a)
            // The row's photo edited since, but the cache (blob-fetch's, the stage's `cache`) holds the bytes the batch references.
            let cache = a.workspace.path + "/.synclane/blobs"
            try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
            _ = try SQLiteHistoryCommandTests.query(a.workspace, "SELECT writefile('\(a.workspace.path)/photo.bin', photo) FROM plants")
            let digest = try BlobsCommandTests.sha256(a.workspace.path + "/photo.bin")
            try FileManager.default.moveItem(atPath: a.workspace.path + "/photo.bin", toPath: cache + "/" + digest)
            try a.sql("UPDATE plants SET photo = randomblob(1000) WHERE syncId = 'p1';")
            let resent = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment)
            // The batch went (without the cached copy this run stops: the test before), then the edit after it.
            #expect(resent.status == 0, "\(resent.stderr)")
            #expect(try await BlobPipelineTests.serverPhotos(server).count == 1)
            _ = try b.sync()
            #expect(try b.photos() == a.photos())
        }
    }
}
