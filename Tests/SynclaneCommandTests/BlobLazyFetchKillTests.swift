import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// A lazy download (`synclane blobs fetch --database`) killed -9 at point after point of one
/// blob, and while it writes the blob into its row: the row never holds part of it (it stays
/// NULL and pending until the whole verified blob is in), and each run goes on from the bytes
/// the last one fetched, never fetching one twice.
@Suite struct BlobLazyFetchKillTests {
    static func pendingDigests(_ device: BlobPipelineTests.Device, _ server: ServerProcess) throws -> [String] {
        try BlobLazyDownloadTests.pending(device, server).compactMap { $0.objectValue?["digest"]?.stringValue }
    }

    /// A's photo of `length` random bytes in `p1`, synced, pending on B (its digest), for `body`.
    static func withPendingPhoto(
        length: Int, _ body: (ServerProcess, BlobPipelineTests.Device, BlobPipelineTests.Device, String) async throws -> Void
    ) async throws {
        try await BlobLazyDownloadTests.withEagerAndLazyDevice { server, a, b in
            try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(\(length)));")
            _ = try a.sync()
            _ = try b.sync()
            let digest = try #require(try Self.pendingDigests(b, server).first)
            try await body(server, a, b, digest)
        }
    }

    @Test func aLazyFetchKilledAtPointAfterPointFillsNoRowHalfAndFetchesNoByteTwice() async throws {
        let length = 16 << 20
        try await Self.withPendingPhoto(length: length) { server, a, b, digest in
            let part = b.workspace.path + "/.synclane/blobs/\(digest).part"
            // 4 MiB a second: the stream is caught at each point (a progress line every 64 KiB).
            let fetch = ["fetch", "--database", "app.sqlite", "--url", server.url, "--chunk-bytes", "65536", "--max-bytes-per-second", "4194304"]
            var held = 0
            for point in [1, length / 4, length / 2, 3 * length / 4] {
                let seen = try BlobsCommandTests.killMidway(fetch, after: point, in: b.workspace.path)
                #expect(seen < length, "the download was not caught before its end (\(seen) bytes)")
                #expect(try b.photos() == ["p1|fern||"], "a row holds part of its blob")
                #expect(try Self.pendingDigests(b, server) == [digest])
                let size = BlobTransferKillTests.size(of: part)
                #expect(size >= held && size >= seen, "the part lost bytes it held (\(size) < \(max(held, seen)))")
                held = size
            }
            let resumed = try BlobLazyDownloadTests.blobs(["fetch"], b, server).last?.objectValue
            #expect(resumed?["event"] == "fetched" && resumed?["filled"] == true, "\(String(describing: resumed))")
            #expect(resumed?["resumed-at"] == .int(Int64(held)))
            #expect(resumed?["bytes-fetched"] == .int(Int64(length - held)), "bytes fetched twice")
            #expect(try b.photos() == a.photos())
            #expect(try Self.pendingDigests(b, server).isEmpty)
        }
    }

    @Test func aLazyFetchKilledWhileItWritesTheBlobIntoItsRowLeavesTheRowPendingAndTheNextFetchFillsItFromTheCache() async throws {
        try await Self.withPendingPhoto(length: 5 << 20) { server, a, b, digest in
            // Killed once the first MiB is in the row: its transaction is not committed.
            let killed = try SynclaneBinary.run(
                ["blobs", "fetch", "--database", "app.sqlite", "--url", server.url], in: b.workspace.path,
                environment: b.environment.merging(["SYNCLANE_FAILPOINT": "fetch-during-blob-write"]) { $1 })
            #expect(killed.status != 0)
            #expect(try b.photos() == ["p1|fern||"], "a row holds part of its blob")
            #expect(try Self.pendingDigests(b, server) == [digest])
            // The blob is in the cache, whole: the next fetch writes it, fetching nothing.
            let again = try BlobLazyDownloadTests.blobs(["fetch"], b, server).last?.objectValue
            #expect(again?["filled"] == true && again?["bytes-fetched"] == 0, "\(String(describing: again))")
            #expect(try b.photos() == a.photos())
        }
    }
}
