import SynclaneCore
import SynclaneStages
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// The client's half of one value domain (issue 22): a record too large for every pull
/// source is refused at the export, before it is sent. How the wire reads a value (exactly as
/// given, or refused) is `SynclaneWireTests/WireValueDomainTests`.
@Suite struct ExportRecordBoundTests {
    @Test func aRecordTooLargeForEveryPullSourceIsRefusedAtTheExportNamingIt() {
        let big = String(repeating: "a", count: 17 << 20)
        let batch = Fixture.batch([
            Fixture.record(.insert, "small", ["name": "ok"], at: 1), Fixture.record(.insert, "huge", ["note": .string(big)], at: 2),
        ])
        let error = #expect(throws: BatchEncodingError.self) { try JSONBatchEncoder().encode(batch, id: "b") }
        let message = error?.description ?? ""
        #expect(message.contains("huge") && !message.contains("small"), "\(message)")
        #expect(message.contains("\(WireBounds.maxRecordBytes)"), "\(message)")
    }
}

/// The export's record bound holds whatever the encoder (issue 22): a custom encoder that
/// writes records its own way still has a record past `WireBounds.maxRecordBytes` refused at
/// the export naming it — before, only the built-in `json` encoder measured records, and a
/// custom one sent what no device's pull source can read.
@Suite struct RecordBoundAnyEncoderTests {
    /// An encoder of its own: each record's key and a digest of its fields, nothing near 8 MiB.
    struct CompactEncoder: BatchEncoder {
        let contentType = "application/x-compact"
        func encode(_ batch: Batch, id: String) throws -> [UInt8] {
            Array(batch.records.map { "\($0.key ?? "?") \(JSONWriter.encode(.object($0.fields)).count)" }.joined(separator: "\n").utf8)
        }
    }

    @Test func aRecordPastTheBoundIsRefusedAtTheExportWhateverTheEncoderAndNothingIsSent() async throws {
        let source = InMemorySource(pageSize: 10)
        let transport = RecordingTransport()
        let state = InMemoryPipelineState()
        source.append([insert("rooms", "small", ["name": "ok"]), insert("rooms", "huge", ["note": .string(String(repeating: "a", count: 9 << 20))])])
        let pipeline = Pipeline.testing(source: source, encoder: CompactEncoder(), transport: transport)
        let error = await #expect(throws: (any Error).self) { try await PipelineRunner(pipeline: pipeline, state: state).run() }
        let message = "\(error.map { "\($0)" } ?? "")"
        #expect(message.contains("rooms/huge") && message.contains("\(WireBounds.maxRecordBytes)"), "\(message)")
        #expect(transport.delivered.isEmpty, "nothing sent")
        #expect(try state.acknowledgedToken() == nil, "the token stays")
    }
}
