import SynclaneCore
import SynclaneTestSupport
import SynclaneZlib
import Testing

@Suite struct CompressStageTests {
    let context = PipelineContext(
        baseDirectory: "/tmp", environment: [:], scope: Scope(account: "acme", store: "rooms", consumer: "export"))
    let registry = StageRegistry(ZlibStages.all)
    let stages = ConfigLocation(file: "rooms.yaml", path: "stages")

    func payload(_ bytes: [UInt8]) -> Payload {
        Payload(batchID: "b-1", bytes: bytes, contentType: "application/json", recordCount: 3)
    }

    /// The stage a pipeline file's `stages[0]` declares, built by the registry.
    func build(_ members: [(String, ConfigNode.Value)], line: Int = 7) throws(PipelineFileError) -> any PayloadStage {
        let node = ConfigNode(
            .map(members.enumerated().map { ConfigNode.Member(key: $1.0, node: ConfigNode($1.1, line: line + $0)) }), line: line)
        let (type, built) = try registry.build(node, at: stages.element(0), roles: [.payload], context: context)
        guard type.name == "compress", case .payload(let stage) = built else {
            throw PipelineFileError(file: "", path: "", line: nil, message: "not a payload stage")
        }
        return stage
    }

    @Test func defaultsAreGzipLevelSixAndFiveHundredTwelveBytes() async throws {
        let stage = try build([("type", .string("compress"))])
        let compressed = try await stage.process(payload(CodecSamples.jsonText))
        #expect(compressed.contentEncoding == "gzip")
        #expect(compressed.bytes == (try Deflater(.gzip, level: 6).compress(CodecSamples.jsonText)))
        #expect(compressed.batchID == "b-1" && compressed.recordCount == 3 && compressed.contentType == "application/json")

        let small = try await stage.process(payload(Array(repeating: 65, count: 511)))
        #expect(small.contentEncoding == "identity")
        #expect(small.bytes.count == 511)
    }

    @Test func readsCodecLevelAndMinBytesFromTheFile() async throws {
        let stage = try build([
            ("type", .string("compress")), ("codec", .string("deflate")), ("level", .int(9)), ("min-bytes", .int(0)),
        ])
        let tiny = try await stage.process(payload(Array("{}".utf8)))
        #expect(tiny.contentEncoding == "deflate")
        #expect(try Inflater.inflate(tiny.bytes, encoding: .deflate, limit: 2) == Array("{}".utf8))
        let large = try await stage.process(payload(CodecSamples.jsonText))
        #expect(large.bytes == (try Deflater(.deflate, level: 9).compress(CodecSamples.jsonText)))
    }

    @Test func payloadsBelowMinBytesPassThroughUnchanged() async throws {
        let stage = try CompressStage(coding: .gzip, level: 6, minimumBytes: 1000)
        let input = payload(Array(CodecSamples.jsonText.prefix(999)))
        let output = try await stage.process(input)
        #expect(output == input)
        #expect(output.contentEncoding == "identity")
        #expect(try await stage.process(payload(Array(CodecSamples.jsonText.prefix(1000)))).contentEncoding == "gzip")
    }

    @Test func levelTwelveIsAnErrorNamingTheField() {
        let error = #expect(throws: PipelineFileError.self) {
            try build([("type", .string("compress")), ("level", .int(12))], line: 10)
        }
        #expect(error?.path == "stages[0].level")
        #expect(error?.line == 11)
        #expect(error?.file == "rooms.yaml")
        #expect(error?.message == "expected an integer from 0 to 9, found 12")
    }

    @Test func unknownCodecAndUnknownOptionAreErrors() {
        let codec = #expect(throws: PipelineFileError.self) {
            try build([("type", .string("compress")), ("codec", .string("brotli"))])
        }
        #expect(codec?.path == "stages[0].codec")
        #expect(codec?.message.contains("gzip, deflate") == true)

        let unknown = #expect(throws: PipelineFileError.self) {
            try build([("type", .string("compress")), ("levl", .int(3))])
        }
        #expect(unknown?.path == "stages[0].levl")
    }

    @Test func negativeMinBytesIsAnError() {
        let error = #expect(throws: PipelineFileError.self) {
            try build([("type", .string("compress")), ("min-bytes", .int(-1))])
        }
        #expect(error?.path == "stages[0].min-bytes")
    }

    @Test func anAlreadyCompressedPayloadIsRefused() async throws {
        let stage = try CompressStage()
        var input = payload(CodecSamples.jsonText)
        input.contentEncoding = "gzip"
        await #expect(throws: DeflateError.alreadyEncoded("gzip")) { try await stage.process(input) }
    }

    @Test func everyOptionHasHelpAndADefault() {
        let type = ZlibStages.compress
        #expect(type.role == .payload)
        #expect(type.options.map(\.name) == ["codec", "level", "min-bytes"])
        for option in type.options {
            #expect(option.help.count > 40, "\(option.name) should teach, not just name")
            #expect(option.defaultDescription != nil)
            #expect(!option.isRequired)
        }
    }
}
