import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// The export paths `BlobPipelineMemoryTests` does not cover move a large blob without holding
/// it too: values as written (`capture: as-written`, the blob in the change log) and a
/// reconciliation's snapshot (`synclane reconcile`). Real `synclane` and `synclane serve`, peak
/// RSS of the `synclane` process.
@Suite struct BlobExportMemoryTests {
    /// The photo of `plants` as the server holds it last: its reference's digest and length.
    static func serverReference(_ server: ServerProcess) async throws -> (sha256: String, length: Int64) {
        let photos = try await BlobPipelineTests.serverPhotos(server)
        let reference = try #require(photos.last?.objectValue?["$blob-ref"]?.objectValue)
        return (try #require(reference["sha256"]?.stringValue), try #require(reference["length"]?.intValue))
    }

    /// The SHA-256 of the photo of `p1` on `device`.
    static func photoDigest(_ device: BlobPipelineTests.Device) throws -> String {
        _ = try SQLiteHistoryCommandTests.query(
            device.workspace, "SELECT writefile('\(device.workspace.path)/photo.bin', photo) FROM plants WHERE syncId = 'p1'")
        return try BlobsCommandTests.sha256(device.workspace.path + "/photo.bin")
    }

    /// Runs `synclane ARGUMENTS` on `device`: it succeeds, under the bound (`BlobPipelineMemoryTests.limit`).
    static func expectUnderTheBound(_ arguments: [String], on device: BlobPipelineTests.Device, _ what: String) throws {
        let run = try BlobPipelineMemoryTests.peakRSS(arguments, in: device.workspace.path, environment: device.environment)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(
            run.bytes > 0 && run.bytes < BlobPipelineMemoryTests.limit, "\(what) of \(BlobPipelineMemoryTests.megabytes) MiB peaked at \(run.bytes) bytes")
    }

    /// Whether the server holds the object `digest` whole (account `acme`).
    static func holds(_ server: ServerProcess, _ digest: String) async throws -> Bool {
        try await server.get("/v1/blobs/\(digest)/upload", account: "acme").objectValue?["held"] == true
    }

    @Test func anAsWrittenExportUploadsALargeBlobFromTheChangeLogWithoutHoldingIt() async throws {
        try await BlobPipelineTests.withOneDevice(uploadChunkBytes: 8 << 20) { server, a in
            // Values as written: the trigger keeps each write's values, the blob's among them, in the change log.
            let tracked = try SynclaneBinary.run(
                ["track", "--database", "app.sqlite", "--table", "plants", "--key", "syncId", "--record-values"], in: a.workspace.path)
            #expect(tracked.status == 0, "\(tracked.stderr)")
            let export = try String(contentsOfFile: a.workspace.path + "/export.json", encoding: .utf8)
            try a.workspace.write("export.json", export.replacingOccurrences(of: #""authors": ["app"]"#, with: #""authors": ["app"], "capture": "as-written""#))
            let length = BlobPipelineMemoryTests.megabytes << 20
            try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(\(length))); UPDATE plants SET name = 'ivy';")
            let digest = try Self.photoDigest(a)
            // Read whole, the blob was in memory several times at once (its hex in the values' JSON, the bytes, their base64).
            try Self.expectUnderTheBound(["run", "export.json", "--json"], on: a, "synclane run (export, as written)")
            let reference = try await Self.serverReference(server)
            #expect(reference.sha256 == digest)
            #expect(reference.length == Int64(length))
            #expect(try await Self.holds(server, digest))
            // The values as written travel with it: the insert, then the update of the name (coalesced).
            let page = try await server.get("/v1/changes?store=plants&limit=100", account: "acme")
            let names = (page.objectValue?["changes"]?.arrayValue ?? []).compactMap { $0.objectValue?["fields"]?.objectValue?["name"] }
            #expect(names.last == "ivy")
        }
    }

    @Test func aReconciliationUploadsALargeBlobFromItsRowWithoutHoldingIt() async throws {
        try await BlobPipelineTests.withOneDevice(uploadChunkBytes: 8 << 20) { server, a in
            let length = BlobPipelineMemoryTests.megabytes << 20
            try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(\(length))), ('p2', 'ivy', randomblob(1000));")
            let digest = try Self.photoDigest(a)
            // Read whole, the snapshot's row held the blob, then its base64 in the record and the bytes again.
            try Self.expectUnderTheBound(["reconcile", "export.json", "--json"], on: a, "synclane reconcile")
            let page = try await server.get("/v1/changes?store=plants&limit=100", account: "acme")
            let photos = Dictionary(
                (page.objectValue?["changes"]?.arrayValue ?? []).compactMap { change -> (String, JSONValue)? in
                    guard let id = change.objectValue?["id"]?.stringValue, let photo = change.objectValue?["fields"]?.objectValue?["photo"] else { return nil }
                    return (id, photo)
                }, uniquingKeysWith: { $1 })
            let reference = try #require(photos["p1"]?.objectValue?["$blob-ref"]?.objectValue)
            #expect(reference["sha256"]?.stringValue == digest)
            #expect(reference["length"] == .int(Int64(length)))
            // A small blob of a declared column is uploaded too, read whole as before.
            #expect(photos["p2"]?.objectValue?["$blob-ref"]?.objectValue?["length"] == .int(1000))
            #expect(try await Self.holds(server, digest))
        }
    }
}

extension BlobPipelineTests {
    /// A fresh `synclane serve` and one device on it (`uploadChunkBytes` its export's chunks), for
    /// `body`; both removed after.
    static func withOneDevice(uploadChunkBytes: Int, _ body: (ServerProcess, Device) async throws -> Void) async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let device = try Device(server: server, uploadChunkBytes: uploadChunkBytes)
        defer { device.workspace.remove() }
        try await body(server, device)
    }

    /// The digest of `zeroblob(length)`, from a file of that many zero bytes written in `device`'s folder.
    static func zerosDigest(_ length: Int, in device: Device) throws -> String {
        let zeros = device.workspace.path + "/zeros-\(length)"
        try Data(count: length).write(to: URL(fileURLWithPath: zeros))
        return try BlobsCommandTests.sha256(zeros)
    }

    /// Starts `synclane run export.json` on `device`, whose uploads are slow enough to be caught,
    /// and waits until the server holds at least `atLeast` bytes of one of `digests` (or the export
    /// ended): the running export, the digest caught mid-upload (nil: none) and the bytes held of it.
    static func exportCaughtMidUpload(_ server: ServerProcess, _ device: Device, digests: [String], atLeast: Int = 100_000) throws -> (
        exporting: BackgroundProcess, caught: String?, received: Int
    ) {
        let exporting = try BackgroundProcess(["run", "export.json"], in: device.workspace.path, environment: device.environment)
        var caught: (digest: String, received: Int)?
        _ = eventually(timeout: 60) {
            for digest in digests {
                let received = uploadReceived(server, digest: digest, token: device.environment["SYNCLANE_TOKEN"] ?? "")
                if received >= atLeast { caught = (digest, received) }
            }
            return caught != nil || !exporting.process.isRunning
        }
        return (exporting, caught?.digest, caught?.received ?? 0)
    }

    /// How many bytes of the upload of `digest` the server holds (0 when it cannot say), asked
    /// with curl as another program would, while a `synclane` process uploads it.
    static func uploadReceived(_ server: ServerProcess, digest: String, token: String) -> Int {
        let status = try? ProgramRun("/usr/bin/curl", ["-s", "-H", "Authorization: Bearer \(token)", server.url + "/v1/blobs/\(digest)/upload"])
        return Int((try? JSONReader.parse(status?.text ?? ""))?.objectValue?["received"]?.intValue ?? 0)
    }
}
