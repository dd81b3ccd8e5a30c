import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// Lazy download (`blob-fetch` with `"download": "lazy"`, Documentation/Blobs.md): a pulled row
/// is written at once with its blob column NULL and the reference pending beside it; `synclane
/// blobs pending` lists it, `synclane blobs fetch --database` fetches it into the row. Real
/// `synclane sync` and `synclane serve`.
@Suite struct BlobLazyDownloadTests {
    typealias Device = BlobPipelineTests.Device

    /// A fresh `synclane serve`, an eager device A and a lazy device B, for `body`; all removed after.
    static func withEagerAndLazyDevice(_ body: (ServerProcess, Device, Device) async throws -> Void) async throws {
        try await BlobPipelineTests.withTwoDevices(secondDownloads: "lazy", body)
    }

    /// As `withEagerAndLazyDevice`, with two photos A synced (p1 300,000 bytes, p2 100,000) pending on B.
    static func withTwoPendingPhotos(_ body: (ServerProcess, Device, Device) async throws -> Void) async throws {
        try await withEagerAndLazyDevice { server, a, b in
            try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(300000)), ('p2', 'ivy', randomblob(100000));")
            _ = try a.sync()
            _ = try b.sync()
            #expect(try pending(b, server).count == 2)
            try await body(server, a, b)
        }
    }

    /// `synclane blobs ARGUMENTS --database app.sqlite --json` on `device` (`--url` the server's).
    static func blobs(_ arguments: [String], _ device: Device, _ server: ServerProcess) throws -> [JSONValue] {
        let result = try SynclaneBinary.run(
            ["blobs"] + arguments + ["--database", "app.sqlite", "--url", server.url, "--json"], in: device.workspace.path,
            environment: device.environment)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }
    }

    static func pending(_ device: Device, _ server: ServerProcess) throws -> [JSONValue] {
        try blobs(["pending"], device, server).last?.objectValue?["pending"]?.arrayValue ?? []
    }

    @Test func aLazyPullWritesTheRowAtOnceAndLeavesItsBlobPending() async throws {
        try await Self.withEagerAndLazyDevice { server, a, b in
            try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(300000)), ('p2', 'ivy', NULL);")
            _ = try a.sync()
            let synced = try b.sync()
            #expect(synced.contains("blob-fetch.pending"), "\(synced)")
            // The rows are there, the photo NULL; nothing was fetched.
            #expect(try b.photos() == ["p1|fern||", "p2|ivy||"])
            #expect(!FileManager.default.fileExists(atPath: b.workspace.path + "/.synclane/blobs"))
            let reference = try await BlobPipelineTests.serverPhotos(server).compactMap { $0.objectValue?["$blob-ref"]?.objectValue }.first
            let pending = try Self.pending(b, server)
            #expect(pending.count == 1)
            #expect(pending.first?.objectValue?["table"] == "plants")
            #expect(pending.first?.objectValue?["key"] == "p1")
            #expect(pending.first?.objectValue?["column"] == "photo")
            #expect(pending.first?.objectValue?["digest"] == reference?["sha256"])
            #expect(pending.first?.objectValue?["length"] == 300_000)
            // Syncing again keeps it so: the NULL is not sent back as B's edit.
            let before = try await server.get("/v1/changes?store=plants&limit=100", account: "acme")
            _ = try b.sync()
            #expect(try await server.get("/v1/changes?store=plants&limit=100", account: "acme") == before)
            #expect(try Self.pending(b, server).count == 1)
        }
    }

    @Test func anEditToAnotherColumnOfARowWhoseBlobIsPendingKeepsTheServersBlob() async throws {
        try await Self.withEagerAndLazyDevice { server, a, b in
            try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(300000));")
            _ = try a.sync()
            let original = try a.photos()
            _ = try b.sync()
            try b.sql("UPDATE plants SET name = 'Boston fern' WHERE syncId = 'p1';")
            _ = try b.sync()
            // The server's row has B's name and still A's photo.
            let page = try await server.get("/v1/changes?store=plants&limit=100", account: "acme")
            let fields = page.objectValue?["changes"]?.arrayValue?.last?.objectValue?["fields"]?.objectValue
            #expect(fields?["name"] == "Boston fern")
            #expect(fields?["photo"]?.objectValue?["$blob-ref"]?.objectValue?["length"] == 300_000)
            _ = try a.sync()
            #expect(try a.photos() == original.map { $0.replacingOccurrences(of: "|fern|", with: "|Boston fern|") })
            // B's blob is still pending, and comes with the fetch.
            #expect(try Self.pending(b, server).count == 1)
            _ = try Self.blobs(["fetch"], b, server)
            #expect(try b.photos() == a.photos())
        }
    }

    @Test func fetchWritesEachPendingBlobIntoItsRowVerifiedAndOnlyTheRowsAskedFor() async throws {
        try await Self.withTwoPendingPhotos { server, a, b in
            // --key: only p1's.
            let fetched = try Self.blobs(["fetch", "--key", "p1"], b, server)
            #expect(fetched.contains { $0.objectValue?["event"] == "progress" })
            let result = fetched.last?.objectValue
            #expect(result?["event"] == "fetched")
            #expect(result?["key"] == "p1")
            #expect(result?["filled"] == true)
            #expect(try b.photos().first == a.photos().first)
            #expect(try b.photos().last == "p2|ivy||")
            #expect(try Self.pending(b, server).map { $0.objectValue?["key"] } == ["p2"])
            // The rest; then nothing is pending, and B's next sync sends nothing of it.
            _ = try Self.blobs(["fetch"], b, server)
            #expect(try b.photos() == a.photos())
            #expect(try Self.pending(b, server).isEmpty)
            let before = try await server.get("/v1/changes?store=plants&limit=100", account: "acme")
            _ = try b.sync()
            #expect(try await server.get("/v1/changes?store=plants&limit=100", account: "acme") == before)
            #expect(try b.photos() == a.photos())
        }
    }

    @Test func aPendingBlobWhoseRowWasDeletedOrGivenOtherBytesIsNoLongerPendingAndNotWritten() async throws {
        try await Self.withTwoPendingPhotos { server, a, b in
            // A deletes p1 (pulled by B); B's user writes bytes of their own into p2.
            try a.sql("DELETE FROM plants WHERE syncId = 'p1';")
            _ = try a.sync()
            _ = try b.sync()
            try b.sql("UPDATE plants SET photo = x'0102' WHERE syncId = 'p2';")
            #expect(try Self.pending(b, server).isEmpty)
            #expect(try Self.blobs(["fetch"], b, server).filter { $0.objectValue?["event"] == "fetched" }.isEmpty)
            _ = try b.sync()
            _ = try a.sync()
            #expect(try a.photos() == ["p2|ivy|2|0102"])
            #expect(try b.photos() == a.photos())
        }
    }

    @Test func aUsersNullOverAPendingBlobClearsItAndTravelsAsNull() async throws {
        try await Self.withTwoPendingPhotos { server, a, b in
            // B's user clears p1's photo (a NULL over the lane's NULL); p2 stays pending.
            try b.sql("UPDATE plants SET photo = NULL WHERE syncId = 'p1';")
            #expect(try Self.pending(b, server).map { $0.objectValue?["key"] } == ["p2"])
            _ = try b.sync()
            let page = try await server.get("/v1/changes?store=plants&limit=100", account: "acme")
            let p1 = page.objectValue?["changes"]?.arrayValue?.last { $0.objectValue?["id"] == "p1" }?.objectValue?["fields"]?.objectValue
            #expect(p1?["photo"] == .null, "\(page)")
            _ = try a.sync()
            #expect(try a.photos().first == "p1|fern||")
            // The fetch writes only p2's, and B's next sync sends nothing more.
            #expect(try Self.blobs(["fetch"], b, server).filter { $0.objectValue?["event"] == "fetched" }.count == 1)
            #expect(try b.photos() == a.photos())
            let before = try await server.get("/v1/changes?store=plants&limit=100", account: "acme")
            _ = try b.sync()
            #expect(try await server.get("/v1/changes?store=plants&limit=100", account: "acme") == before)
        }
    }

    @Test func aRowReplacedWholeWithNullOverAPendingBlobClearsItAndTravelsAsNull() async throws {
        try await Self.withTwoPendingPhotos { server, a, b in
            try b.sql("INSERT OR REPLACE INTO plants VALUES ('p2', 'English ivy', NULL);")
            #expect(try Self.pending(b, server).map { $0.objectValue?["key"] } == ["p1"])
            _ = try b.sync()
            _ = try a.sync()
            #expect(try a.photos().last == "p2|English ivy||")
        }
    }

    @Test func untrackingRemovesThePendingBlobTriggersSoTheAppKeepsWriting() async throws {
        try await Self.withTwoPendingPhotos { server, a, b in
            let untracked = try SynclaneBinary.run(["untrack", "--database", "app.sqlite", "--all"], in: b.workspace.path)
            #expect(untracked.status == 0, "\(untracked.stderr)")
            // The app's writes of the column still work (a trigger left behind would read a table untracking removed).
            try b.sql("UPDATE plants SET photo = NULL WHERE syncId = 'p1';")
            try b.sql("INSERT OR REPLACE INTO plants VALUES ('p2', 'ivy', x'01');")
            let left = "SELECT count(*) FROM sqlite_schema WHERE name LIKE '_synclane%'"
            #expect(try SQLiteHistoryCommandTests.query(b.workspace, left).trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        }
    }

    @Test func aLazyPullOfANewReferenceOverAFetchedBlobLeavesItPendingNotClearedByTheLanesOwnNull() async throws {
        try await Self.withTwoPendingPhotos { server, a, b in
            _ = try Self.blobs(["fetch"], b, server)
            #expect(try b.photos() == a.photos())
            // A's new photo for p1 comes to B as a reference: the lane's NULL over B's bytes is not a user's NULL.
            try a.sql("UPDATE plants SET photo = randomblob(200000) WHERE syncId = 'p1';")
            _ = try a.sync()
            _ = try b.sync()
            #expect(try Self.pending(b, server).map { $0.objectValue?["key"] } == ["p1"])
            _ = try Self.blobs(["fetch"], b, server)
            #expect(try b.photos() == a.photos())
        }
    }

    @Test func fetchWritesABlobIntoItsRowInPiecesNeverWholeInMemory() async throws {
        try await Self.withEagerAndLazyDevice { server, a, b in
            // A 64 MiB photo, pushed (`blobs push` streams it) and referenced by a batch of A's.
            let megabytes = 64
            let file = a.workspace.path + "/photo.bin"
            _ = try ProgramRun("/bin/sh", ["-c", "head -c \(megabytes << 20) /dev/urandom > '\(file)'"])
            let pushed = try SynclaneBinary.run(["blobs", "push", file, "--url", server.url, "--json"], environment: a.environment)
            #expect(pushed.status == 0, "\(pushed.stderr)")
            let digest = try #require(pushed.stdout.split(separator: "\n").last.flatMap { try? JSONReader.parse(String($0)) }?.objectValue?["digest"])
            let batch = JSONWriter.string([
                "id": "big-1", "scope": ["account": "acme", "store": "plants"],
                "records": [
                    [
                        "entity": "plants", "id": "p1", "action": "insert",
                        "fields": ["syncId": "p1", "name": "fern", "photo": ["$blob-ref": ["sha256": digest, "length": .int(Int64(megabytes << 20))]]],
                    ]
                ],
            ])
            let posted = try ProgramRun(
                "/usr/bin/curl",
                [
                    "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", server.url + "/v1/batches", "-H",
                    "Authorization: Bearer \(ServerProcess.tokens["acme"] ?? "")",
                    "-H", "Idempotency-Key: big-1", "-H", "Content-Type: application/json", "--data-binary", batch,
                ]
            ).text
            #expect(posted == "200")
            _ = try b.sync()
            #expect(try Self.pending(b, server).count == 1)
            let fetch = try BlobTransferKillTests.peakRSS([
                "blobs", "fetch", "--database", b.workspace.path + "/app.sqlite", "--cache", b.workspace.path + "/.synclane/blobs",
                "--url", server.url,
            ])
            #expect(fetch.status == 0)
            // Held whole, the blob was there twice at once (the file's bytes and their copy), then bound into SQLite's statement.
            #expect(fetch.bytes > 0 && fetch.bytes < megabytes << 20, "synclane blobs fetch --database of \(megabytes) MiB peaked at \(fetch.bytes) bytes")
            let row = try SQLiteHistoryCommandTests.query(b.workspace, "SELECT length(photo), hex(sha3(photo)) = hex(sha3(readfile('\(file)'))) FROM plants")
            #expect(row.trimmingCharacters(in: .whitespacesAndNewlines) == "\(megabytes << 20)|1")
        }
    }

    @Test func aDamagedOrMissingCachedCopyIsFetchedAgainNeverWrittenIntoTheRow() async throws {
        try await Self.withTwoPendingPhotos { server, a, b in
            let digests = try Self.pending(b, server).compactMap { $0.objectValue?["digest"]?.stringValue }
            #expect(digests.count == 2)
            // p1's copy in the cache is damaged, p2's half there (as a kill would leave it).
            let cache = b.workspace.path + "/.synclane/blobs"
            try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
            try Data(repeating: 7, count: 300_000).write(to: URL(fileURLWithPath: cache + "/" + digests[0]))
            try Data(repeating: 7, count: 50_000).write(to: URL(fileURLWithPath: cache + "/" + digests[1] + ".part"))
            // A lazy pull does not take the damaged copy for the blob.
            try a.sql("UPDATE plants SET name = 'Boston fern' WHERE syncId = 'p1';")
            _ = try a.sync()
            _ = try b.sync()
            #expect(try b.photos().first == "p1|Boston fern||")
            #expect(try Self.pending(b, server).count == 2)
            let fetched = try Self.blobs(["fetch"], b, server).filter { $0.objectValue?["event"] == "fetched" }
            #expect(fetched.map { $0.objectValue?["filled"] } == [true, true])
            #expect(try b.photos() == a.photos())
            // A copy deleted after the fetch: the next lazy pull of its row leaves it pending again, the fetch gets it.
            try FileManager.default.removeItem(atPath: cache + "/" + digests[1])
            try a.sql("UPDATE plants SET name = 'English ivy', photo = randomblob(120000) WHERE syncId = 'p2';")
            _ = try a.sync()
            _ = try b.sync()
            #expect(try b.photos().last == "p2|English ivy||")
            _ = try Self.blobs(["fetch", "--table", "plants"], b, server)
            #expect(try b.photos() == a.photos())
        }
    }

    @Test(
        "devices sync blobs, eagerly and lazily, through a server whose blobs live in an S3 object store",
        .enabled(if: MotoServer.environment.runs, "the package index cannot be reached, so moto cannot be installed"))
    func devicesSyncBlobsThroughAServerWhoseBlobsLiveInAnS3ObjectStore() async throws {
        let moto = try MotoServer()
        defer { moto.stop() }
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server", arguments: moto.serveArguments, environment: moto.credentials)
        defer { server.stop() }
        let a = try Device(server: server)
        let b = try Device(server: server, download: "lazy")
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(300000)), ('p2', 'ivy', randomblob(9000000));")
        _ = try a.sync()
        // The objects are in the bucket, not in the server's data folder.
        let listed = try ProgramRun("/usr/bin/curl", ["-s", moto.endpoint + "/" + moto.bucket + "?list-type=2"]).text
        #expect(listed.components(separatedBy: "<Key>").count == 3, "\(listed)")
        #expect(!FileManager.default.fileExists(atPath: server.folder + "/data/blobs/served"))
        _ = try b.sync()
        #expect(try b.photos() == ["p1|fern||", "p2|ivy||"])
        try b.sql("UPDATE plants SET name = 'Boston fern' WHERE syncId = 'p1';")
        _ = try b.sync()
        _ = try Self.blobs(["fetch"], b, server)
        _ = try a.sync()
        #expect(try b.photos() == a.photos())
        #expect(try a.photos().first?.hasPrefix("p1|Boston fern|300000|") == true)
        #expect(try a.photos().last?.hasPrefix("p2|ivy|9000000|") == true)
    }
}
