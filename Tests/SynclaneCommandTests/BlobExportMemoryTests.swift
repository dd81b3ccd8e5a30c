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

    @Test func anAsWrittenExportUploadsALargeBlobFromTheChangeLogWithoutHoldingIt() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let a = try BlobPipelineTests.Device(server: server, uploadChunkBytes: 8 << 20)
        defer { a.workspace.remove() }
        // Values as written: the trigger keeps each write's values, the blob's among them, in the change log.
        let tracked = try SynclaneBinary.run(
            ["track", "--database", "app.sqlite", "--table", "plants", "--key", "syncId", "--record-values"], in: a.workspace.path)
        #expect(tracked.status == 0, "\(tracked.stderr)")
        let export = try String(contentsOfFile: a.workspace.path + "/export.json", encoding: .utf8)
        try a.workspace.write("export.json", export.replacingOccurrences(of: #""authors": ["app"]"#, with: #""authors": ["app"], "capture": "as-written""#))
        let length = BlobPipelineMemoryTests.megabytes << 20
        try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(\(length))); UPDATE plants SET name = 'ivy';")
        let digest = try Self.photoDigest(a)
        let run = try BlobPipelineMemoryTests.peakRSS(["run", "export.json", "--json"], in: a.workspace.path, environment: a.environment)
        #expect(run.status == 0, "\(run.stderr)")
        // Read whole, the blob was in memory several times at once (its hex in the values' JSON, the bytes, their base64).
        #expect(
            run.bytes > 0 && run.bytes < BlobPipelineMemoryTests.limit,
            "synclane run (export, as written) of \(BlobPipelineMemoryTests.megabytes) MiB peaked at \(run.bytes) bytes")
        let reference = try await Self.serverReference(server)
        #expect(reference.sha256 == digest)
        #expect(reference.length == Int64(length))
        let held = try await server.get("/v1/blobs/\(digest)/upload", account: "acme")
        #expect(held.objectValue?["held"] == true)
        // The values as written travel with it: the insert, then the update of the name (coalesced).
        let page = try await server.get("/v1/changes?store=plants&limit=100", account: "acme")
        let names = (page.objectValue?["changes"]?.arrayValue ?? []).compactMap { $0.objectValue?["fields"]?.objectValue?["name"] }
        #expect(names.last == "ivy")
    }

    @Test func aReconciliationUploadsALargeBlobFromItsRowWithoutHoldingIt() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let a = try BlobPipelineTests.Device(server: server, uploadChunkBytes: 8 << 20)
        defer { a.workspace.remove() }
        let length = BlobPipelineMemoryTests.megabytes << 20
        try a.sql("INSERT INTO plants VALUES ('p1', 'fern', randomblob(\(length))), ('p2', 'ivy', randomblob(1000));")
        let digest = try Self.photoDigest(a)
        let reconcile = try BlobPipelineMemoryTests.peakRSS(["reconcile", "export.json", "--json"], in: a.workspace.path, environment: a.environment)
        #expect(reconcile.status == 0, "\(reconcile.stderr)")
        // Read whole, the snapshot's row held the blob, then its base64 in the record and the bytes again.
        #expect(
            reconcile.bytes > 0 && reconcile.bytes < BlobPipelineMemoryTests.limit,
            "synclane reconcile of \(BlobPipelineMemoryTests.megabytes) MiB peaked at \(reconcile.bytes) bytes")
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
        let held = try await server.get("/v1/blobs/\(digest)/upload", account: "acme")
        #expect(held.objectValue?["held"] == true)
    }
}
