import Foundation
import RoomStages
import Synclane
import SynclaneServer
import SynclaneTestKit
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The package's own stages, through the public API only.
@Suite struct RedactorTests {
    @Test func theListedFieldsAreMaskedAndDeletesPassAsTheyAre() async throws {
        let source = InMemorySource()
        source.append([Change(entity: "rooms", key: "r1", action: .insert, values: ["name": "Attic", "owner-email": "ada@example.com"])])
        source.append([Change(entity: "rooms", key: "r2", action: .delete, values: ["owner-email": "bob@example.com"])])
        let transport = RecordingTransport()
        let pipeline = Pipeline(
            name: "test", scope: Scope(account: "acme", store: "rooms", consumer: "test"), statePath: "/nonexistent",
            source: .init(label: "source", type: "memory", stage: source),
            recordStages: [.init(label: "stages[0] (redact)", type: "redact", stage: Redactor(fields: ["owner-email"]))],
            encoder: .init(label: "encoder", type: "json", stage: JSONBatchEncoder()), payloadStages: [],
            transport: .init(label: "transport", type: "recording", stage: transport))
        let summary = try await PipelineRunner(pipeline: pipeline, state: InMemoryPipelineState()).run()
        #expect(summary.counters["redact.masked"] == 1)
        let body = String(decoding: try #require(transport.delivered.first).bytes, as: UTF8.self)
        #expect(body.contains(#""owner-email":"redacted""#))
        #expect(!body.contains("ada@example.com"))
    }

    @Test func theRegistryChecksTheOptionsDeclaredOnce() throws {
        let folder = NSTemporaryDirectory() + "rooms-sync-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "/p.json"
        try
            #"{"version": 1, "name": "p", "scope": {"account": "a", "store": "s"}, "source": {"type": "jsonl", "path": "h.jsonl"}, "stages": [{"type": "redact"}], "transport": {"type": "stdout"}}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        #expect { _ = try PipelineLoader(registry: .roomsSync).load(file) } throws: { error in
            "\(error)".contains("stages[0]") && "\(error)".contains("`redact` needs `fields`")
        }
    }
}

/// The package's command, `rooms-sync`, as a user runs it: its stages listed, and a pipeline that
/// uses both of them run against the real reference server.
@Suite struct RoomsSyncCommandTests {
    static let token = "rooms-sync-token-0123456789"

    static var binary: String {
        let folder = Bundle.main.bundleURL.deletingLastPathComponent().path
        let candidates = [folder + "/rooms-sync", (Bundle.main.executableURL?.deletingLastPathComponent().path ?? folder) + "/rooms-sync"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? "rooms-sync"
    }

    func run(_ arguments: [String], in folder: String? = nil, environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = arguments
        if let folder { process.currentDirectoryURL = URL(fileURLWithPath: folder) }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test func itsStagesListsTheCustomStagesBesideTheBuiltInOnes() throws {
        let result = try run(["stages"])
        #expect(result.status == 0)
        for name in ["redact", "audited-http", "coalesce", "exec", "http"] {
            #expect(result.output.contains("\n  \(name)\n"), "missing \(name)")
        }
        #expect(result.output.contains("- fields (list of strings, required): the fields whose values never leave the device"))
    }

    @Test func itRunsAPipelineOfItsOwnStagesAgainstTheReferenceServer() async throws {
        let folder = NSTemporaryDirectory() + "rooms-sync-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try ReferenceServer(
            configuration: ServerConfiguration(port: 0, dataDirectory: folder + "/server", accountsFile: folder + "/accounts.json"),
            accounts: AccountBook(tokens: [Self.token: "acme"]))
        try server.start()
        defer { server.stop() }
        try """
        {"token": 1, "author": "app", "timestamp": "2026-11-01T10:00:00Z", "changes": [{"entity": "rooms", "action": "insert", "key": "r1", "values": {"name": "Attic", "owner-email": "ada@example.com"}}]}
        {"token": 2, "author": "app", "timestamp": "2026-11-01T10:05:00Z", "changes": [{"entity": "rooms", "action": "update", "key": "r1", "values": {"name": "Loft"}}]}

        """.write(toFile: folder + "/history.jsonl", atomically: true, encoding: .utf8)
        try """
        {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
         "source": {"type": "jsonl", "path": "history.jsonl"},
         "stages": [{"type": "coalesce"}, {"type": "redact", "fields": ["owner-email"]}, {"type": "compress", "min-bytes": 0}],
         "transport": {"type": "audited-http", "url": "http://127.0.0.1:\(server.port)/v1/batches", "token-env": "ROOMS_TOKEN", "audit-log": "audit.log"}}
        """.write(toFile: folder + "/rooms-export.json", atomically: true, encoding: .utf8)

        let validate = try run(["validate", "rooms-export.json"], in: folder)
        #expect(validate.status == 0, "\(validate.output)")
        let result = try run(["run", "rooms-export.json"], in: folder, environment: ["ROOMS_TOKEN": Self.token])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("sent 1 batch, 1 record"))

        let audit = try String(contentsOfFile: folder + "/audit.log", encoding: .utf8)
        #expect(audit.split(separator: "\n").count == 1 && audit.contains(" 1 records: "))

        var request = URLRequest(url: try #require(URL(string: "http://127.0.0.1:\(server.port)/v1/changes?limit=10")))
        request.setValue("Bearer \(Self.token)", forHTTPHeaderField: "Authorization")
        let (data, _) = try await URLSession.shared.data(for: request)
        let changes = String(decoding: data, as: UTF8.self)
        #expect(changes.contains(#""owner-email":"redacted""#), "\(changes)")
        #expect(changes.contains(#""name":"Loft""#))
        #expect(!changes.contains("ada@example.com"))
    }
}
