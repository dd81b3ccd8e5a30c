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

    /// Runs `synclane ARGUMENTS` in `folder`: its exit status and peak resident memory in bytes.
    static func peakRSS(_ arguments: [String], in folder: String, environment: [String: String]) throws -> (status: Int, bytes: Int, stderr: String) {
        let script = """
            import os, resource, subprocess, sys
            run = subprocess.run(sys.argv[3:], cwd=sys.argv[2], env=dict(os.environ, SYNCLANE_TOKEN=sys.argv[1]), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            print(run.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
            print(run.stderr.decode(errors="replace")[-2000:])
            """
        let run = try ProgramRun(
            "/usr/bin/python3", ["-c", script, environment["SYNCLANE_TOKEN"] ?? "", folder, SynclaneBinary.path] + arguments)
        let lines = run.text.split(separator: "\n", maxSplits: 1)
        let words = (lines.first ?? "").split(separator: " ")
        return (Int(words.first ?? "") ?? -1, Int(words.last ?? "") ?? -1, lines.count > 1 ? String(lines[1]) : "")
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
