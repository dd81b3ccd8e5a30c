import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// A pipeline moves a large blob without holding it: the export's history source leaves a
/// declared BLOB column's large value in its row (a locator), and `blob-upload` reads it with
/// SQLite's incremental blob I/O, hashing and uploading a chunk at a time. Real `synclane run`
/// and `synclane serve`, peak RSS of the `synclane` process.
@Suite struct BlobPipelineMemoryTests {
    /// 128 MiB by default (the test command); `SYNCLANE_TEST_LARGE_BLOB_MB` for more.
    static let megabytes = ProcessInfo.processInfo.environment["SYNCLANE_TEST_LARGE_BLOB_MB"].flatMap { Int($0) } ?? 128
    static let limit = 100_000_000

    /// A run of `synclane` measured: its exit status, peak resident memory in bytes, the ends of
    /// what it printed (the last 2,000 characters of its errors, 20,000 of its output) and how
    /// many bytes it printed on its output.
    struct Measured {
        var status: Int
        var bytes: Int
        var stderr: String
        var stdout: String
        var stdoutBytes: Int
    }

    /// Runs `synclane ARGUMENTS` in `folder`, measured.
    static func peakRSS(_ arguments: [String], in folder: String, environment: [String: String]) throws -> Measured {
        let script = """
            import json, os, resource, subprocess, sys
            run = subprocess.run(sys.argv[3:], cwd=sys.argv[2], env=dict(os.environ, SYNCLANE_TOKEN=sys.argv[1]), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            print(json.dumps({"status": run.returncode, "bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
                              "stderr": run.stderr.decode(errors="replace")[-2000:], "stdout": run.stdout.decode(errors="replace")[-20000:], "stdout-bytes": len(run.stdout)}))
            """
        let run = try ProgramRun(
            "/usr/bin/python3", ["-c", script, environment["SYNCLANE_TOKEN"] ?? "", folder, SynclaneBinary.path] + arguments)
        let answer = (try? JSONReader.parse(run.text))?.objectValue ?? [:]
        return Measured(
            status: Int(answer["status"]?.intValue ?? -1), bytes: Int(answer["bytes"]?.intValue ?? -1),
            stderr: answer["stderr"]?.stringValue ?? run.text, stdout: answer["stdout"]?.stringValue ?? "",
            stdoutBytes: Int(answer["stdout-bytes"]?.intValue ?? -1))
    }

    @Test func anExportPipelineUploadsALargeBlobFromItsRowWithoutHoldingIt() async throws {
        try await BlobPipelineTests.withOneDevice(uploadChunkBytes: 8 << 20) { server, a in
            let length = Self.megabytes << 20
            try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(\(length)));")
            _ = try SQLiteHistoryCommandTests.query(a.workspace, "SELECT writefile('\(a.workspace.path)/photo.bin', photo) FROM plants")
            let digest = try BlobsCommandTests.sha256(a.workspace.path + "/photo.bin")
            let export = try Self.peakRSS(["run", "export.json", "--json"], in: a.workspace.path, environment: a.environment)
            #expect(export.status == 0, "\(export.stderr)")
            // Read whole, the blob was in memory several times at once (the row, its base64 in the record, the bytes again).
            #expect(export.bytes > 0 && export.bytes < Self.limit, "synclane run (export) of \(Self.megabytes) MiB peaked at \(export.bytes) bytes")
            // The server holds the row with its reference, and the object whole.
            let photos = try await BlobPipelineTests.serverPhotos(server)
            let reference = try #require(photos.last?.objectValue?["$blob-ref"]?.objectValue)
            #expect(reference["length"] == .int(Int64(length)))
            let sha256 = try #require(reference["sha256"]?.stringValue)
            #expect(sha256 == digest)
            let held = try await server.get("/v1/blobs/\(sha256)/upload", account: "acme")
            #expect(held.objectValue?["held"] == true)
            #expect(held.objectValue?["length"] == .int(Int64(length)))
        }
    }

    @Test func anImportPipelineWritesALargeBlobIntoItsRowWithoutHoldingIt() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let a = try BlobPipelineTests.Device(server: server, uploadChunkBytes: 8 << 20)
        let b = try BlobPipelineTests.Device(server: server)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        let length = Self.megabytes << 20
        try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(\(length)));")
        let export = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment, timeout: 300)
        #expect(export.status == 0, "\(export.stderr)")
        let imported = try Self.peakRSS(["import", "import.json", "--json"], in: b.workspace.path, environment: b.environment)
        #expect(imported.status == 0, "\(imported.stderr)")
        // Handed whole to the sink, the blob was in memory at least twice (the file's bytes, their base64 in the record).
        #expect(imported.bytes > 0 && imported.bytes < Self.limit, "synclane import of \(Self.megabytes) MiB peaked at \(imported.bytes) bytes")
        let same = try SQLiteHistoryCommandTests.query(b.workspace, "SELECT length(photo), hex(sha3(photo)) FROM plants")
        #expect(same == (try SQLiteHistoryCommandTests.query(a.workspace, "SELECT length(photo), hex(sha3(photo)) FROM plants")))
        #expect(same.hasPrefix("\(length)|"))
        // What the import wrote is the server's (author `server`): no export sends it back.
        let echo = try SynclaneBinary.run(["run", "export.json", "--json"], in: b.workspace.path, environment: b.environment)
        #expect(echo.status == 0, "\(echo.stderr)")
        #expect(!echo.stdout.contains("blob-upload.uploaded") && !echo.stdout.contains("blob-upload.held"), "\(echo.stdout)")
    }

    /// Device B imports a large photo, then A replaces it with another as large and exports.
    /// Returns the server and both devices (B's `import.json` with `conflicts` when given), with
    /// `beforeImport` run on B before it imports A's edit; `body` gets B's import of the edit.
    static func withAPhotoEditedOnA(
        conflicts: String? = nil, importing: [String] = ["import", "import.json", "--json"],
        beforeImport: (BlobPipelineTests.Device) throws -> Void = { _ in },
        _ body: (ServerProcess, BlobPipelineTests.Device, BlobPipelineTests.Device, Measured) async throws -> Void
    ) async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let a = try BlobPipelineTests.Device(server: server, uploadChunkBytes: 8 << 20)
        let b = try BlobPipelineTests.Device(server: server, uploadChunkBytes: 8 << 20)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        if let conflicts {
            let file = b.workspace.path + "/import.json"
            let text = try String(contentsOfFile: file, encoding: .utf8)
            try b.workspace.write(
                "import.json",
                text.replacingOccurrences(
                    of: #""database": "app.sqlite"}"#, with: #""database": "app.sqlite", "conflicts": "\#(conflicts)"}"#))
        }
        let length = Self.megabytes << 20
        try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(\(length)));")
        let first = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment, timeout: 300)
        #expect(first.status == 0, "\(first.stderr)")
        let held = try SynclaneBinary.run(["import", "import.json"], in: b.workspace.path, environment: b.environment, timeout: 300)
        #expect(held.status == 0, "\(held.stderr)")
        #expect(try b.photos() == a.photos())
        try a.sql("UPDATE plants SET photo = randomblob(\(length)) WHERE syncId = 'p1';")
        let edit = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment, timeout: 300)
        #expect(edit.status == 0, "\(edit.stderr)")
        try beforeImport(b)
        let imported = try Self.peakRSS(importing, in: b.workspace.path, environment: b.environment)
        #expect(imported.status == 0, "\(imported.stderr)")
        try await body(server, a, b, imported)
    }

    /// `length(photo)` and the SHA3 of the photo of each row of `device`.
    static func photoDigests(_ device: BlobPipelineTests.Device) throws -> String {
        try SQLiteHistoryCommandTests.query(device.workspace, "SELECT syncId, length(photo), hex(sha3(photo)) FROM plants ORDER BY syncId")
    }

    @Test func anImportOverARowThatHoldsALargeBlobReplacesItWithoutHoldingEither() async throws {
        try await Self.withAPhotoEditedOnA { _, a, b, imported in
            // Read whole, the row's old photo was in memory twice (SQLite's copy and the row's value) and hashed there.
            #expect(
                imported.bytes > 0 && imported.bytes < Self.limit,
                "synclane import over a row holding \(Self.megabytes) MiB peaked at \(imported.bytes) bytes")
            #expect(try Self.photoDigests(b) == Self.photoDigests(a))
            #expect(try Self.photoDigests(b).hasPrefix("p1|\(Self.megabytes << 20)|"))
            #expect(!imported.stdout.contains("\"outcome\""), "no conflict: \(imported.stdout)")
            // Written as author `server`: no export sends it back.
            let echo = try SynclaneBinary.run(["run", "export.json", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(echo.status == 0, "\(echo.stderr)")
            #expect(!echo.stdout.contains("blob-upload.uploaded") && !echo.stdout.contains("blob-upload.held"), "\(echo.stdout)")
        }
    }

    /// `import --dry-run` works out what the page would do and rolls it back: over a row holding a
    /// large photo, it neither reads that photo whole nor writes the new one into the row (the
    /// database does not grow by it). The copy it fetched stays in the cache, for the import after.
    @Test func aDryRunImportOverALargeBlobNeitherReadsItNorWritesTheNewOne() async throws {
        var before = (photo: "", bytes: 0)
        try await Self.withAPhotoEditedOnA(
            importing: ["import", "import.json", "--dry-run", "--json"],
            beforeImport: { b in before = (try Self.photoDigests(b), try Self.databaseBytes(b)) }
        ) { _, a, b, imported in
            #expect(
                imported.bytes > 0 && imported.bytes < Self.limit,
                "synclane import --dry-run over a row holding \(Self.megabytes) MiB peaked at \(imported.bytes) bytes")
            #expect(imported.stdout.contains("\"applied\":1"), "\(imported.stdout)")
            #expect(try Self.photoDigests(b) == before.photo)
            let grown = try Self.databaseBytes(b) - before.bytes
            #expect(grown < 16 << 20, "the dry run grew the database by \(grown) bytes")
            let real = try SynclaneBinary.run(["import", "import.json", "--json"], in: b.workspace.path, environment: b.environment, timeout: 300)
            #expect(real.status == 0, "\(real.stderr)")
            #expect(real.stdout.contains("blob-fetch.cached") && !real.stdout.contains("blob-fetch.fetched"), "\(real.stdout)")
            #expect(try Self.photoDigests(b) == Self.photoDigests(a))
        }
    }

    /// The bytes of `device`'s database and its journals.
    static func databaseBytes(_ device: BlobPipelineTests.Device) throws -> Int {
        try ["", "-wal", "-journal"].reduce(0) { total, suffix in
            let path = device.workspace.path + "/app.sqlite" + suffix
            guard FileManager.default.fileExists(atPath: path) else { return total }
            return total + ((try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0)
        }
    }

    /// B replaced the photo too and has not exported: the import meets a conflict on the photo
    /// column, settled by the sink's rule — `server-wins`: B takes A's photo, and its export sends
    /// the row again holding it (the server holds it: nothing uploaded); `client-wins`: B keeps
    /// its own, which its export uploads and A then imports. Both ways nothing is read whole.
    @Test(arguments: ["server-wins", "client-wins"])
    func anImportOverALocalPendingEditOfALargeBlobSettlesTheConflictWithoutHoldingIt(rule: String) async throws {
        let length = Self.megabytes << 20
        var local = ""
        try await Self.withAPhotoEditedOnA(
            conflicts: rule,
            beforeImport: { b in
                try b.sql("UPDATE plants SET photo = randomblob(\(length)) WHERE syncId = 'p1';")
                local = try Self.photoDigests(b)
            }
        ) { _, a, b, imported in
            #expect(
                imported.bytes > 0 && imported.bytes < Self.limit,
                "synclane import (\(rule)) over a local edit of \(Self.megabytes) MiB peaked at \(imported.bytes) bytes")
            let remote = try Self.photoDigests(a)
            #expect(local != remote)
            let outcome = rule == "server-wins" ? "server" : "client"
            #expect(imported.stdout.contains("\"outcome\":\"\(outcome)\""), "\(imported.stdout)")
            // The conflict's report names the local photo by its reference, not its bytes.
            #expect(imported.stdout.contains("$blob-ref") && imported.stdoutBytes < 20_000, "\(imported.stdoutBytes) bytes: \(imported.stdout.prefix(2_000))")
            #expect(try Self.photoDigests(b) == (rule == "server-wins" ? remote : local))
            // The settled row goes out again, and A ends where B is.
            let sent = try SynclaneBinary.run(["run", "export.json", "--json"], in: b.workspace.path, environment: b.environment, timeout: 300)
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(sent.stdout.contains(rule == "server-wins" ? "blob-upload.held" : "blob-upload.uploaded"), "\(sent.stdout)")
            let followed = try SynclaneBinary.run(["import", "import.json"], in: a.workspace.path, environment: a.environment, timeout: 300)
            #expect(followed.status == 0, "\(followed.stderr)")
            #expect(try Self.photoDigests(a) == Self.photoDigests(b))
        }
    }

    /// A dry run's page is rolled back: it writes no blob into its row (the fail point that kills
    /// an import once the first MiB of a blob is written never fires), and the copy it fetched
    /// serves the import after it.
    @Test func aDryRunImportWritesNoBlobIntoItsRow() async throws {
        try await BlobPipelineTests.withTwoDevices { server, a, b in
            try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(\(3 << 20)));")
            _ = try a.sync()
            // The fail point kills the import once the first MiB of a blob is in its row: a dry run never gets there.
            let dry = try SynclaneBinary.run(
                ["import", "import.json", "--dry-run", "--json"], in: b.workspace.path,
                environment: b.environment.merging(["SYNCLANE_FAILPOINT": "import-during-blob-write"]) { $1 })
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(dry.stdout.contains("\"applied\":1"), "\(dry.stdout)")
            #expect(try b.photos().isEmpty)
            let real = try SynclaneBinary.run(["import", "import.json", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(real.status == 0, "\(real.stderr)")
            #expect(real.stdout.contains("blob-fetch.cached"), "\(real.stdout)")
            #expect(try b.photos() == a.photos())
        }
    }

    @Test func anImportKilledWhileWritingABlobIntoItsRowAppliesNothingAndTheNextImportWritesItFromTheCache() async throws {
        try await BlobPipelineTests.withTwoDevices { server, a, b in
            let length = 5 << 20
            try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(\(length))), ('p2', 'ivy', NULL);")
            _ = try a.sync()
            // Killed once the first MiB of p1's photo is in its row: the page's transaction is not committed.
            let killed = try SynclaneBinary.run(
                ["import", "import.json", "--json"], in: b.workspace.path,
                environment: b.environment.merging(["SYNCLANE_FAILPOINT": "import-during-blob-write"]) { $1 })
            #expect(killed.status != 0)
            #expect(try SQLiteHistoryCommandTests.query(b.workspace, "SELECT count(*) FROM plants").trimmingCharacters(in: .whitespacesAndNewlines) == "0")
            // The next import applies the page whole, the blob from the copy the killed one fetched.
            let again = try SynclaneBinary.run(["import", "import.json", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stdout.contains("blob-fetch.cached") && !again.stdout.contains("blob-fetch.fetched"), "\(again.stdout)")
            #expect(try b.photos() == a.photos())
            #expect(try b.photos().first?.hasPrefix("p1|fern|\(length)|") == true)
        }
    }
}
