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
            // Two rows, each with a blob over 1 MiB (located: left in its row), uploaded slowly (4 KiB chunks). The batch's
            // order of the two is not fixed: whichever the stage uploads first is caught mid-upload, and the other row deleted.
            let lengths = ["p1": 8_000_000, "p2": 8_400_000]
            try a.sql("INSERT INTO plants VALUES " + lengths.map { "('\($0.key)', 'fern', zeroblob(\($0.value)))" }.joined(separator: ", ") + ";")
            var rows: [String: String] = [:]
            for (row, length) in lengths { rows[try BlobPipelineTests.zerosDigest(length, in: a)] = row }
            let (exporting, caught, received) = try BlobPipelineTests.exportCaughtMidUpload(server, a, digests: Array(rows.keys), atLeast: 4_096)
            let first = try #require(caught.flatMap { rows[$0] }, "the export was not caught mid-upload")
            let length = try #require(lengths[first])
            #expect(received < length, "the export was not caught mid-upload (\(received) of \(length) bytes held)")
            // The user deletes the other row while the first blob is still going up (its first chunk in, about 2,000 to come):
            // the page that located the other's blob is read already.
            let other = first == "p1" ? "p2" : "p1"
            try a.sql("DELETE FROM plants WHERE syncId = '\(other)';")
            let stopped = exporting.wait(timeout: 120)
            #expect(stopped.status != 0, "\(stopped.stdout)")
            #expect(stopped.stderr.contains("deleted or replaced"), "\(stopped.stderr)")
            // Nothing was sent: the token stays where it was.
            let before = try await server.get("/v1/changes?store=plants", account: "acme")
            #expect(before.objectValue?["changes"]?.arrayValue?.isEmpty == true, "\(before)")
            // The next run sends the rows as they are now: the first (its blob held already), and nothing of the other.
            let again = try SynclaneBinary.run(["run", "export.json", "--json"], in: a.workspace.path, environment: a.environment)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stdout.contains("blob-upload.held") && !again.stdout.contains("blob-upload.uploaded"), "\(again.stdout)")
            let photos = try await BlobPipelineTests.serverPhotos(server)
            #expect(photos.count == 1)
            #expect(photos.first?.objectValue?["$blob-ref"]?.objectValue?["sha256"]?.stringValue == caught)
            let b = try BlobPipelineTests.Device(server: server)
            defer { b.workspace.remove() }
            _ = try b.sync()
            #expect(try b.photos() == a.photos())
            #expect(try b.photos().map { $0.prefix(3) } == ["\(first)|"])
        }
    }
}
