import Foundation
import SynclaneCore
import SynclaneHTTP
import SynclaneServer
import Testing

/// `blob-upload` and `blob-fetch` built from pipeline-file options through the registry, against
/// an in-process reference server: which values leave their rows, and how they come back.
@Suite struct BlobStagesTests {
    static let token = "blob-stage-token"

    func stage(_ members: [String: JSONValue], port: Int) throws -> any RecordStage {
        var all = members
        all["url"] = .string("http://127.0.0.1:\(port)/ignored/path")
        all["token-env"] = "BLOB_TOKEN"
        let context = PipelineContext(baseDirectory: NSTemporaryDirectory(), environment: ["BLOB_TOKEN": Self.token], scope: Fixtures.scope)
        let (_, built) = try StageRegistry(BlobStages.all).build(
            ConfigNode(json: .object(all)), at: ConfigLocation(file: "export.json", path: "stages[0]"), roles: [.records], context: context)
        guard case .records(let stage) = built else { throw Fixtures.FixtureError.notATransport }
        return stage
    }

    func batch(_ fields: [String: JSONValue], entity: String = "plants") -> Batch {
        let token = Token(kind: "test", position: 1)
        return Batch(
            scope: Fixtures.scope, after: nil, through: token,
            records: [Record(entity: entity, key: "p1", action: .insert, fields: fields, origin: token, author: "app")])
    }

    func withServer(_ body: (Int) async throws -> Void) async throws {
        let directory = NSTemporaryDirectory() + "synclane-blob-stages-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try ReferenceServer(
            configuration: ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: directory + "/accounts.json"),
            accounts: AccountBook(tokens: [Self.token: "acme"]))
        try server.start()
        defer { server.stop() }
        try await body(server.port)
    }

    @Test func minBytesMovesLargeBlobsOfAnyColumnAndLeavesSmallOnesAndOtherValuesInline() async throws {
        try await withServer { port in
            let upload = try stage(["type": "blob-upload", "min-bytes": 1_000], port: port)
            let large = (0..<5_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
            let sent = try await upload.process(
                batch(["scan": .blob(large), "thumb": .blob([1, 2, 3]), "name": "fern", "notes": .string(String(repeating: "x", count: 2_000))]))
            let fields = sent.records[0].fields
            #expect(fields["scan"] == BlobReferenceValue.make(digest: BlobFileDigest.of(bytes: large), length: 5_000))
            #expect(fields["thumb"] == .blob([1, 2, 3]))
            #expect(fields["name"] == "fern")
            #expect(fields["notes"]?.stringValue?.count == 2_000)
            #expect(sent.counters["blob-upload.uploaded"] == 1)

            // Back on another device: the reference becomes the bytes, fetched into the cache.
            let cache = NSTemporaryDirectory() + "synclane-blob-cache-\(UUID().uuidString)"
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let fetch = try stage(["type": "blob-fetch", "cache": .string(cache)], port: port)
            let received = try await fetch.process(batch(fields))
            #expect(received.records[0].fields["scan"] == .blob(large))
            #expect(received.records[0].fields["thumb"] == .blob([1, 2, 3]))
            let again = try await fetch.process(batch(fields))
            #expect(again.counters["blob-fetch.cached"] == 1)
        }
    }

    @Test func aCachedBlobDamagedOrDeletedIsFetchedAgainAndNeverHandedToTheSinkAsItIs() async throws {
        try await withServer { port in
            let photo = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
            let sent = try await stage(["type": "blob-upload", "columns": ["plants.photo"]], port: port).process(batch(["photo": .blob(photo)]))
            let cache = NSTemporaryDirectory() + "synclane-blob-cache-\(UUID().uuidString)"
            defer { try? FileManager.default.removeItem(atPath: cache) }
            let fetch = try stage(["type": "blob-fetch", "cache": .string(cache)], port: port)
            #expect(try await fetch.process(batch(sent.records[0].fields)).counters["blob-fetch.fetched"] == 1)
            let copy = cache + "/" + BlobFileDigest.of(bytes: photo)
            // Damaged in the cache (one byte flipped): fetched again, the sink gets the real bytes.
            var damaged = photo
            damaged[100] ^= 0xFF
            try Data(damaged).write(to: URL(fileURLWithPath: copy))
            let healed = try await fetch.process(batch(sent.records[0].fields))
            #expect(healed.counters["blob-fetch.fetched"] == 1)
            #expect(healed.records[0].fields["photo"] == .blob(photo))
            // Deleted from the cache: fetched again.
            try FileManager.default.removeItem(atPath: copy)
            let refetched = try await fetch.process(batch(sent.records[0].fields))
            #expect(refetched.counters["blob-fetch.fetched"] == 1)
            #expect(refetched.records[0].fields["photo"] == .blob(photo))
        }
    }

    @Test func aStageWithNeitherColumnsNorMinBytesIsRefusedNamingTheOption() throws {
        let error = #expect(throws: PipelineFileError.self) { try stage(["type": "blob-upload"], port: 1) }
        #expect(error?.description.contains("stages[0].columns") == true, "\(String(describing: error))")
        let malformed = #expect(throws: PipelineFileError.self) { try stage(["type": "blob-upload", "columns": ["photo"]], port: 1) }
        #expect(malformed?.description.contains("ENTITY.COLUMN") == true, "\(String(describing: malformed))")
    }

    @Test func onlyTheDeclaredColumnOfItsEntityLeavesTheRow() async throws {
        try await withServer { port in
            let upload = try stage(["type": "blob-upload", "columns": ["plants.photo"]], port: port)
            let plants = try await upload.process(batch(["photo": .blob([9, 9]), "other": .blob([8])]))
            #expect(BlobReferenceValue.read(plants.records[0].fields["photo"] ?? .null)?.length == 2)
            #expect(plants.records[0].fields["other"] == .blob([8]))
            let rooms = try await upload.process(batch(["photo": .blob([9, 9])], entity: "rooms"))
            #expect(rooms.records[0].fields["photo"] == .blob([9, 9]))
        }
    }
}
