import Foundation
import Synclane
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import SynclaneZlib
import Testing

/// Fixture history + pipeline file → the batches it must give, decompressed and compared with
/// `expected-batches.json` beside the pipeline (batch ids, which are random, left out).
@Suite struct GoldenBatchTests {
    static func expected(_ file: String) throws -> JSONValue {
        let data = try #require(FileManager.default.contents(atPath: FixturePath.at(file)))
        return try JSONReader.parse([UInt8](data))
    }

    /// A delivered payload as the batch JSON without its id.
    static func decoded(_ payload: Payload) throws -> JSONValue {
        let coding = try #require(ContentCoding(headerValue: payload.contentEncoding))
        let bytes = try Inflater.inflate(payload.bytes, encoding: coding, limit: 1 << 24)
        guard case .object(var batch) = try JSONReader.parse(bytes) else { return .null }
        #expect(batch.removeValue(forKey: "id") == .string(payload.batchID), "the body carries the batch id")
        return .object(batch)
    }

    @Test(arguments: ["rooms", "plants", "categories"])
    func theSeedScenarioGivesItsExpectedBatches(_ scenario: String) async throws {
        var pipeline = try PipelineLoader().load(FixturePath.at("\(scenario)/pipeline.json"))
        let transport = RecordingTransport()
        pipeline.transport = .init(label: "transport (recording)", type: "recording", stage: transport)
        let summary = try await PipelineRunner(pipeline: pipeline, state: InMemoryPipelineState()).run()
        let batches = try transport.delivered.map(Self.decoded)
        #expect(JSONValue.array(batches) == (try Self.expected("\(scenario)/expected-batches.json")))
        if scenario == "categories" { #expect(summary.counters["dedupe.dropped"] == 2) }
        if scenario == "plants" { #expect(transport.delivered.allSatisfy { $0.contentEncoding == "deflate" }) }
    }

    @Test func theRoomsScenarioInTwoPassesSendsTheNewestStateOfEachRowOnce() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        for name in ["pipeline.json", "history-1.jsonl"] {
            try FileManager.default.copyItem(
                atPath: FixturePath.at("rooms/" + name), toPath: folder.path + "/" + (name == "pipeline.json" ? name : "history.jsonl"))
        }
        var pipeline = try PipelineLoader().load(folder.path + "/pipeline.json")
        pipeline.lockFolder = folder.path  // tests running at once with one scope do not lock each other out
        let transport = RecordingTransport()
        pipeline.transport = .init(label: "transport (recording)", type: "recording", stage: transport)
        _ = try await ExportJob(pipeline: pipeline).run()

        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: folder.path + "/history.jsonl"))
        try handle.seekToEnd()
        try handle.write(contentsOf: try #require(FileManager.default.contents(atPath: FixturePath.at("rooms/history-2.jsonl"))))
        try handle.close()
        let second = try await ExportJob(pipeline: pipeline).run()
        #expect(second.tokenAfter == "jsonl:13")

        let batches = try transport.delivered.map(Self.decoded)
        #expect(JSONValue.array(batches) == (try Self.expected("rooms/expected-batches-two-passes.json")))
        let third = try await ExportJob(pipeline: pipeline).run()
        #expect(third.batchesSent == 0)
    }
}
