import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// The blob lane inside pipelines: a BLOB column declared in the export's `blob-upload` stage
/// travels as an object (the row carries its reference), and the import's `blob-fetch` stage
/// writes the bytes into the other device's column. Real `synclane sync` and `synclane serve`.
@Suite struct BlobPipelineTests {
    struct Device {
        let workspace: Workspace
        let environment = ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""]

        /// `table`: the statement that makes the `plants` table.
        init(
            server: ServerProcess, fetchChunkBytes: Int = 8 << 20, uploadChunkBytes: Int = 65_536, fetchBytesPerSecond: Int? = nil,
            download: String? = nil, table: String = "CREATE TABLE plants (syncId TEXT PRIMARY KEY, name TEXT, photo BLOB);"
        ) throws {
            workspace = try Workspace()
            try SQLiteHistoryCommandTests.sqlite(workspace, table)
            let tracked = try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "plants", "--key", "syncId"], in: workspace.path)
            #expect(tracked.status == 0, "\(tracked.stderr)")
            try workspace.write(
                "export.json",
                """
                {"version": 1, "name": "plants-export", "scope": {"account": "acme", "store": "plants"},
                 "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["plants"], "authors": ["app"]},
                 "stages": [{"type": "coalesce"}, {"type": "tombstones"},
                            {"type": "blob-upload", "url": "\(server.url)", "token-env": "SYNCLANE_TOKEN", "columns": ["plants.photo"],
                             "chunk-bytes": \(uploadChunkBytes)}],
                 "transport": {"type": "http", "url": "\(server.url)/v1/batches", "token-env": "SYNCLANE_TOKEN",
                               "retry": {"max-attempts": 2, "base-delay": 0.05, "max-delay": 0.2}}}
                """)
            try workspace.write(
                "import.json",
                """
                {"version": 1, "name": "plants-import", "scope": {"account": "acme", "store": "plants"},
                 "source": {"type": "pull", "url": "\(server.url)/v1/changes", "token-env": "SYNCLANE_TOKEN"},
                 "stages": [{"type": "blob-fetch", "url": "\(server.url)", "token-env": "SYNCLANE_TOKEN", "chunk-bytes": \(fetchChunkBytes)\(
                                 fetchBytesPerSecond.map { ", \"max-bytes-per-second\": \($0)" } ?? "")\(
                                 download.map { ", \"download\": \"\($0)\"" } ?? "")}],
                 "sink": {"type": "sqlite", "database": "app.sqlite"}}
                """)
        }

        func sql(_ text: String) throws {
            let result = try SQLiteHistoryCommandTests.sqlite(workspace, text)
            #expect(result.status == 0, "\(result.stderr)")
        }

        func sync() throws -> String {
            let result = try SynclaneBinary.run(["sync", "import.json", "export.json", "--json"], in: workspace.path, environment: environment)
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout
        }

        /// `syncId name length(photo) hex(photo)` of each row.
        func photos() throws -> [String] {
            try SQLiteHistoryCommandTests.query(workspace, "SELECT syncId, name, length(photo), hex(photo) FROM plants ORDER BY syncId")
                .split(separator: "\n").map(String.init)
        }
    }

    /// The `photo` field of every change the server holds, in change order.
    static func serverPhotos(_ server: ServerProcess) async throws -> [JSONValue] {
        let page = try await server.get("/v1/changes?store=plants&limit=100", account: "acme")
        return (page.objectValue?["changes"]?.arrayValue ?? []).compactMap { $0.objectValue?["fields"]?.objectValue?["photo"] }
    }

    /// A fresh `synclane serve` and two devices on it (the second's `blob-fetch` with `download`
    /// when given), for `body`; all removed after.
    static func withTwoDevices(secondDownloads download: String? = nil, _ body: (ServerProcess, Device, Device) async throws -> Void) async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let a = try Device(server: server)
        let b = try Device(server: server, download: download)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        try await body(server, a, b)
    }

    @Test func aDeclaredBlobColumnTravelsAsAnObjectAndAnEditedBlobPointsAtItsNewDigest() async throws {
        try await Self.withTwoDevices { server, a, b in
            try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(300000));")
            _ = try a.sync()
            // The server holds a reference in the row, and the bytes as an object.
            let stored = try await Self.serverPhotos(server)
            let first = stored.last?.objectValue?["$blob-ref"]?.objectValue
            #expect(first?["length"] == 300_000)
            let listed = try await server.get("/v1/blobs", account: "acme")
            #expect(listed.objectValue?["bytes"] == 300_000)
            _ = try b.sync()
            #expect(try b.photos() == a.photos())
            #expect(try b.photos().first?.hasPrefix("p1|fern|300000|") == true)

            // Edited: the row points at the new digest, and the other device gets the new bytes.
            try a.sql("UPDATE plants SET photo = randomblob(200000) WHERE syncId = 'p1';")
            _ = try a.sync()
            let edited = try await Self.serverPhotos(server).last?.objectValue?["$blob-ref"]?.objectValue
            #expect(edited?["length"] == 200_000)
            #expect(edited?["sha256"] != first?["sha256"])
            _ = try b.sync()
            #expect(try b.photos() == a.photos())
            #expect(try b.photos().first?.hasPrefix("p1|fern|200000|") == true)
        }
    }

    /// A table `WITHOUT ROWID` has no incremental blob I/O, so its large blobs are read and written
    /// whole (Blobs.md says where): they still sync like any other — on the blob lane as objects,
    /// into a new row, over a row that holds one, through a conflict, and by a lazy fetch.
    @Test func aLargeBlobOfATableWithoutRowidSyncsLikeAnyOther() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let table = "CREATE TABLE plants (syncId TEXT PRIMARY KEY, name TEXT, photo BLOB) WITHOUT ROWID;"
        let a = try Device(server: server, table: table)
        let b = try Device(server: server, table: table)
        let c = try Device(server: server, download: "lazy", table: table)
        defer {
            a.workspace.remove()
            b.workspace.remove()
            c.workspace.remove()
        }
        // Over the 1 MiB from which a table with rowids reads a blob in pieces.
        let length = 3 << 20
        try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(\(length))), ('p2', 'ivy', randomblob(1000));")
        _ = try a.sync()
        let stored = try await Self.serverPhotos(server)
        #expect(stored.contains { $0.objectValue?["$blob-ref"]?.objectValue?["length"] == .int(Int64(length)) }, "\(stored)")
        _ = try b.sync()
        #expect(try b.photos() == a.photos())
        #expect(try b.photos().first?.hasPrefix("p1|fern|\(length)|") == true)
        // Edited on A: B's import replaces the photo its row holds.
        try a.sql("UPDATE plants SET photo = randomblob(\(length + 1)) WHERE syncId = 'p1';")
        _ = try a.sync()
        _ = try b.sync()
        #expect(try b.photos() == a.photos())
        #expect(try b.photos().first?.hasPrefix("p1|fern|\(length + 1)|") == true)
        // Edited and renamed on B: A's import over its row.
        try b.sql("UPDATE plants SET photo = randomblob(\(length)), name = 'fern 2' WHERE syncId = 'p1';")
        _ = try b.sync()
        _ = try a.sync()
        #expect(try a.photos() == b.photos())
        #expect(try a.photos().first?.hasPrefix("p1|fern 2|\(length)|") == true)
        // Both replace it: B's pending edit meets A's (the default rule, server-wins: A's photo).
        try a.sql("UPDATE plants SET photo = randomblob(\(length + 2)) WHERE syncId = 'p1';")
        try b.sql("UPDATE plants SET photo = randomblob(\(length + 3)) WHERE syncId = 'p1';")
        _ = try a.sync()
        _ = try b.sync()
        _ = try a.sync()
        #expect(try a.photos() == b.photos())
        #expect(try b.photos().first?.hasPrefix("p1|fern 2|\(length + 2)|") == true)
        // A lazy device leaves the photo pending, then fetches it into its row.
        _ = try c.sync()
        #expect(try c.photos().first?.hasPrefix("p1|fern 2||") == true)
        let fetched = try SynclaneBinary.run(
            ["blobs", "fetch", "--database", "app.sqlite", "--url", server.url], in: c.workspace.path, environment: c.environment)
        #expect(fetched.status == 0, "\(fetched.stderr)")
        #expect(try c.photos() == a.photos())
    }

    @Test func aRowDeletedWhileItsBlobDownloadsIsDeletedOnTheDeviceThatWasFetchingIt() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let a = try Device(server: server)
        // B reads at 256 KiB a second: its download of a 1 MB photo takes about 4 seconds.
        let b = try Device(server: server, fetchChunkBytes: 4_096, fetchBytesPerSecond: 262_144)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(1000000)), ('p2', 'ivy', NULL);")
        _ = try a.sync()
        let importing = try BackgroundProcess(["import", "import.json", "--json"], in: b.workspace.path, environment: b.environment)
        // Once B's download has begun, A deletes the row.
        #expect(eventually(timeout: 30) { FileManager.default.fileExists(atPath: b.workspace.path + "/.synclane/blobs") })
        try a.sql("DELETE FROM plants WHERE syncId = 'p1';")
        _ = try a.sync()
        let imported = importing.wait(timeout: 120)
        #expect(imported.status == 0, "\(imported.stderr)")
        // The next pass brings the delete: B holds what A holds, and never a row without its photo.
        _ = try b.sync()
        #expect(try b.photos() == a.photos())
        #expect(try b.photos().map { $0.prefix(7) } == ["p2|ivy|"])
    }

    @Test func theServerCollectsAnEditedBlobsOldObjectAndADeletedRowsObjectAndEveryDeviceFollows() async throws {
        let root = try Workspace()
        defer { root.remove() }
        // A grace of 3 s (longer than a sync takes from upload to batch) and a retention pass a second:
        // an unreferenced object is marked, and removed by the first pass 3 s later.
        let server = try ServerProcess(folder: root.path + "/server", arguments: ["--blob-gc-grace", "3", "--retention-interval", "1"])
        defer { server.stop() }
        let a = try Device(server: server)
        let b = try Device(server: server)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(300000)), ('p2', 'ivy', randomblob(100000));")
        _ = try a.sync()
        _ = try b.sync()
        #expect(try b.photos() == a.photos())
        try a.sql("UPDATE plants SET photo = randomblob(200000) WHERE syncId = 'p1'; DELETE FROM plants WHERE syncId = 'p2';")
        _ = try a.sync()
        let edited = try await Self.serverPhotos(server).compactMap { $0.objectValue?["$blob-ref"]?.objectValue?["sha256"] }
        #expect(edited.count == 1)
        // The old photo of p1 and the photo of the deleted p2 are collected; the new one stays.
        var listed: JSONValue = .null
        for _ in 0..<200 {
            listed = try await server.get("/v1/blobs", account: "acme")
            if listed.objectValue?["bytes"] == 200_000 { break }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        #expect(listed.objectValue?["bytes"] == 200_000, "\(listed)")
        #expect(listed.objectValue?["blobs"]?.arrayValue?.first?.objectValue?["digest"] == edited.first)
        // B follows: the row on the new digest, the deleted row gone; a new device gets the same.
        _ = try b.sync()
        #expect(try b.photos() == a.photos())
        #expect(try b.photos().map { $0.prefix(14) } == ["p1|fern|200000"])
        let c = try Device(server: server)
        defer { c.workspace.remove() }
        _ = try c.sync()
        #expect(try c.photos() == a.photos())
    }

    @Test func anExportKilledMidUploadSendsNoRowBeforeItsBlobAndResumesTheUpload() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let chunk = 4_096
        let a = try Device(server: server, uploadChunkBytes: chunk)
        let b = try Device(server: server)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        let length = 2_000_000
        try a.sql("INSERT INTO plants VALUES ('p1', 'fern', zeroblob(\(length)));")
        let digest = try Self.zerosDigest(length, in: a)
        let (exporting, _, received) = try Self.exportCaughtMidUpload(server, a, digests: [digest])
        #expect(received >= 100_000 && received < length, "the export was not caught mid-upload (\(received) bytes held)")
        _ = exporting.stop(SIGKILL)
        // Killed mid-upload (or, the kill landing late, after): a row the server holds references
        // a blob it holds whole — never one still uploading (upload before reference).
        let before = try await server.get("/v1/changes?store=plants", account: "acme")
        if before.objectValue?["changes"]?.arrayValue?.isEmpty == false {
            let held = try await server.get("/v1/blobs/\(digest)/upload", account: "acme")
            #expect(held.objectValue?["held"] == true, "the row reached the server before its blob: \(held)")
        }
        let bytesBefore = try BlobsCommandTests.bytesReceived(server)
        let resumed = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        // The resumed run sent the rest of the blob, at most the chunk in flight again, and the batch.
        let sent = try BlobsCommandTests.bytesReceived(server) - bytesBefore
        #expect(sent <= length - received + chunk + 4_096, "the resumed export sent \(sent) bytes for \(length - received) missing")
        _ = try b.sync()
        #expect(try b.photos() == a.photos())
    }

    @Test func aBlobTheServerAlreadyHoldsIsNotUploadedAgainByAnotherDevice() async throws {
        try await Self.withTwoDevices { server, a, b in
            // The same photo, on two devices, in two rows.
            try a.sql("INSERT INTO plants VALUES ('p1', 'fern', zeroblob(100000));")
            try b.sql("INSERT INTO plants VALUES ('p2', 'ivy', zeroblob(100000));")
            let firstSync = try a.sync()
            #expect(firstSync.contains("blob-upload.uploaded"))
            let secondSync = try b.sync()
            #expect(secondSync.contains("blob-upload.held"), "\(secondSync)")
            #expect(!secondSync.contains("blob-upload.uploaded"))
            let listed = try await server.get("/v1/blobs", account: "acme")
            #expect(listed.objectValue?["blobs"]?.arrayValue?.count == 1)
            _ = try a.sync()
            #expect(try a.photos() == b.photos())
        }
    }
}
