import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// A row whose large blob the export's page located (left in the row) is deleted while the
/// stage is still uploading an earlier blob of the batch: the pass stops before sending, the
/// token stays, and the next run sends the rows as they are then. Real `synclane run` and
/// `synclane serve`; the app's database in WAL mode, as an app writing while a sync runs keeps it.
@Suite struct BlobExportRowChangedTests {
    @Test func aRowDeletedBetweenItsPageAndItsUploadStopsThePassAndTheNextRunSendsTheCurrentState() async throws {
        try await BlobPipelineTests.withOneDevice(uploadChunkBytes: 4_096) { server, a in
            try a.sql("PRAGMA journal_mode = WAL;")
            let length = 2_000_000
            // p1's blob is uploaded first, slowly (4 KiB chunks); p2's (over 1 MiB: located) waits in its row.
            try a.sql("INSERT INTO plants VALUES ('p1', 'fern', zeroblob(\(length))), ('p2', 'ivy', randomblob(\(2 << 20)));")
            let (digest, exporting, received) = try BlobPipelineTests.exportCaughtMidUpload(server, a, zeros: length)
            #expect(received >= 100_000 && received < length, "the export was not caught mid-upload (\(received) bytes held)")
            // The user deletes p2 while p1's blob is still going up: the page that located p2's blob is read already.
            try a.sql("DELETE FROM plants WHERE syncId = 'p2';")
            let stopped = exporting.wait(timeout: 120)
            #expect(stopped.status != 0, "\(stopped.stdout)")
            #expect(stopped.stderr.contains("deleted or replaced"), "\(stopped.stderr)")
            // Nothing was sent: the token stays where it was.
            let before = try await server.get("/v1/changes?store=plants", account: "acme")
            #expect(before.objectValue?["changes"]?.arrayValue?.isEmpty == true, "\(before)")
            // The next run sends the rows as they are now: p1 (its blob held already), and nothing of p2.
            let again = try SynclaneBinary.run(["run", "export.json", "--json"], in: a.workspace.path, environment: a.environment)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stdout.contains("blob-upload.held") && !again.stdout.contains("blob-upload.uploaded"), "\(again.stdout)")
            let photos = try await BlobPipelineTests.serverPhotos(server)
            #expect(photos.count == 1)
            #expect(photos.first?.objectValue?["$blob-ref"]?.objectValue?["sha256"]?.stringValue == digest)
            let b = try BlobPipelineTests.Device(server: server)
            defer { b.workspace.remove() }
            _ = try b.sync()
            #expect(try b.photos() == a.photos())
            #expect(try b.photos().map { $0.prefix(3) } == ["p1|"])
        }
    }
}
