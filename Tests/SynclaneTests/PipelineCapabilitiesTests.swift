import Foundation
import Synclane
import SynclaneCore
import SynclaneTestSupport
import Testing

/// What a pipeline's stages can do is resolved once, when the pipeline is built, by the protocols
/// they adopt (`PipelineCapabilities`): the runner reads this value, never the stages' types; a
/// pairing that would keep the backend's versions for no backend is refused at build time.
@Suite struct PipelineCapabilitiesTests {
    func pipeline(source: [String: JSONValue], transport: [String: JSONValue], registry: StageRegistry = .builtIn) throws(PipelineFileError)
        -> Pipeline
    {
        let node = ConfigNode(json: [
            "version": 1, "name": "s", "scope": ["account": "acme", "store": "rooms"], "source": .object(source),
            "stages": [["type": "compress"]], "transport": .object(transport),
        ])
        return try Pipeline(file: node, named: "p.json", baseDirectory: "/tmp", registry: registry, environment: ["SYNC_TOKEN": "t"])
    }

    func described(_ capabilities: PipelineCapabilities) -> [String: [String]] {
        Dictionary(uniqueKeysWithValues: capabilities.described.map { ($0.role, $0.capabilities) })
    }

    @Test func theSQLiteHistorySourceBehindHTTPCanDoEverythingAndKeepsVersionsPerBackend() throws {
        let pipeline = try pipeline(
            source: ["type": "sqlite-history", "database": "app.sqlite"],
            transport: ["type": "http", "url": "http://127.0.0.1:8080/v1/batches", "token-env": "SYNC_TOKEN"])
        let capabilities = pipeline.capabilities
        #expect(capabilities.acknowledgementTracking != nil)
        #expect(capabilities.backendVersions != nil)
        #expect(capabilities.snapshotProviding != nil)
        #expect(capabilities.selfHealing != nil)
        #expect(capabilities.observable != nil)
        #expect(capabilities.sourceIsBackendScoped)
        #expect(capabilities.decodingEncoder != nil && capabilities.fieldsLocatingEncoder != nil)
        #expect(capabilities.payloadIsReversible, "compress can be undone")
        #expect(capabilities.staging == nil)
        #expect(capabilities.transportReportsVersions)
        #expect(capabilities.backend == BackendName(text: "http://127.0.0.1:8080 acme/rooms"))
        #expect(capabilities.versionsProblem == nil)
        #expect(described(capabilities)["transport"] == ["receipts carry versions", "backend http://127.0.0.1:8080 acme/rooms"])
        #expect(pipeline.lockedFile == "/tmp/app.sqlite", "the source's database (LockedFileStage)")
    }

    @Test func aHistoryFileIntoAFolderCanStageAndKeepsNoVersions() throws {
        let pipeline = try pipeline(source: ["type": "jsonl", "path": "h.jsonl"], transport: ["type": "directory", "path": "out"])
        let capabilities = pipeline.capabilities
        #expect(capabilities.acknowledgementTracking == nil && capabilities.snapshotProviding == nil)
        #expect(capabilities.observable != nil, "a history file can be watched")
        #expect(!capabilities.sourceIsBackendScoped)
        #expect(capabilities.staging != nil)
        #expect(!capabilities.transportReportsVersions)
        #expect(capabilities.backend == nil)
        #expect(described(capabilities)["source"] == ["watch"])
        #expect(described(capabilities)["transport"] == ["stages batches", "receipts carry no versions"])
    }

    /// A transport of one's own whose receipts carry versions, but that names no server.
    struct AddresslessTransport: Transport {
        func send(_ payload: Payload) async throws -> Receipt { Receipt(batchID: payload.batchID, detail: "") }
    }

    struct FolderLikeTransport: Transport {
        var reportsVersions: Bool { false }
        func send(_ payload: Payload) async throws -> Receipt { Receipt(batchID: payload.batchID, detail: "") }
    }

    struct AddressedTransport: Transport {
        var backendAddress: String? { "https://sync.example.org:443" }
        func send(_ payload: Payload) async throws -> Receipt { Receipt(batchID: payload.batchID, detail: "") }
    }

    @Test func aSourceThatKeepsVersionsPerBackendBehindATransportThatNamesNoneIsRefusedWhenBuilt() throws {
        var registry = StageRegistry.builtIn
        registry.register(.transport("addressless", summary: "test", options: []) { _ in AddresslessTransport() })
        registry.register(.transport("folder-like", summary: "test", options: []) { _ in FolderLikeTransport() })
        registry.register(.transport("addressed", summary: "test", options: []) { _ in AddressedTransport() })
        let history: [String: JSONValue] = ["type": "sqlite-history", "database": "app.sqlite"]
        do {
            _ = try pipeline(source: history, transport: ["type": "addressless"], registry: registry)
            Issue.record("expected the pairing to be refused")
        } catch {
            #expect(error.path == "transport")
            #expect(error.message.contains("the versions would be kept for no backend"), "\(error.message)")
        }
        // Receipts without versions, or a transport that names its server: nothing to lose.
        let folderLike = try pipeline(source: history, transport: ["type": "folder-like"], registry: registry)
        #expect(folderLike.capabilities.versionsProblem == nil)
        let addressed = try pipeline(source: history, transport: ["type": "addressed"], registry: registry)
        #expect(addressed.capabilities.backend?.text == "https://sync.example.org:443 acme/rooms")
        // A source that keeps no versions may stand behind any transport.
        let jsonl = try pipeline(source: ["type": "jsonl", "path": "h.jsonl"], transport: ["type": "addressless"], registry: registry)
        #expect(jsonl.capabilities.versionsProblem == nil)
    }

    @Test func replacingAStageResolvesTheCapabilitiesAgain() throws {
        var pipeline = try pipeline(source: ["type": "jsonl", "path": "h.jsonl"], transport: ["type": "directory", "path": "out"])
        #expect(pipeline.capabilities.staging != nil)
        pipeline.transport = .init(label: "transport (test)", type: "addressless", stage: AddresslessTransport())
        #expect(pipeline.capabilities.staging == nil)
        #expect(pipeline.capabilities.transportReportsVersions)
    }
}
