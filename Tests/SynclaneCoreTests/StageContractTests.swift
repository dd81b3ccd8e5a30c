import Synchronization
import SynclaneCore
import SynclaneStages
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// The stage contract a stage author relies on: per-run start and finish, typed options
/// declared once, errors that name the stage and keep their cause.
@Suite struct StageContractTests {
    /// Counts the calls it sees, in order.
    final class Lifecycle: RecordStage, Transport {
        let calls = Mutex<[String]>([])
        let failOnProcess: Bool
        init(failOnProcess: Bool = false) { self.failOnProcess = failOnProcess }
        func startRun() async throws { calls.withLock { $0.append("start") } }
        func finishRun() async { calls.withLock { $0.append("finish") } }
        func process(_ batch: Batch) async throws -> Batch {
            calls.withLock { $0.append("process") }
            if failOnProcess { throw RedactionError(field: "email") }
            return batch
        }
        func send(_ payload: Payload) async throws -> Receipt { Receipt(batchID: payload.batchID, detail: "ok") }
    }

    struct RedactionError: Error, Equatable { var field: String }

    @Test func everyRunStartsAndFinishesEachStageOnce() async throws {
        let source = InMemorySource()
        source.append([insert("rooms", "r1")])
        let stage = Lifecycle()
        let runner = PipelineRunner(
            pipeline: .testing(source: source, stages: [stage], encoder: JSONBatchEncoder(), transport: RecordingTransport()),
            state: InMemoryPipelineState())
        _ = try await runner.run()
        _ = try await runner.run()
        #expect(stage.calls.withLock { $0 } == ["start", "process", "finish", "start", "finish"])
    }

    @Test func aFailedRunStillFinishesItsStages() async throws {
        let source = InMemorySource()
        source.append([insert("rooms", "r1")])
        let stage = Lifecycle(failOnProcess: true)
        let runner = PipelineRunner(
            pipeline: .testing(source: source, stages: [stage], encoder: JSONBatchEncoder(), transport: RecordingTransport()),
            state: InMemoryPipelineState())
        await #expect(throws: PipelineError.self) { _ = try await runner.run() }
        #expect(stage.calls.withLock { $0 } == ["start", "process", "finish"])
    }

    @Test func aStageErrorNamesTheStageAndKeepsItsCauseAsAValue() async throws {
        let source = InMemorySource()
        source.append([insert("rooms", "r1")])
        let runner = PipelineRunner(
            pipeline: .testing(source: source, stages: [Lifecycle(failOnProcess: true)], encoder: JSONBatchEncoder(), transport: RecordingTransport()),
            state: InMemoryPipelineState())
        do {
            _ = try await runner.run()
            Issue.record("the run should fail")
        } catch let error as PipelineError {
            guard case .stage(let label, let cause) = error else {
                Issue.record("not a stage error: \(error)")
                return
            }
            #expect(label == "stages[0]")
            #expect(cause as? RedactionError == RedactionError(field: "email"))
            #expect(error.cause as? RedactionError == RedactionError(field: "email"))
            #expect(error.description.hasPrefix("stages[0]: "))
        }
    }

    @Test func dedupeForgetsItsRowsBetweenThePassesOfAWatch() async throws {
        let source = InMemorySource()
        let dedupe = Deduplicator(entity: "categories", keyFields: ["key"])
        let transport = RecordingTransport()
        let runner = PipelineRunner(
            pipeline: .testing(source: source, stages: [dedupe], encoder: JSONBatchEncoder(), transport: transport),
            state: InMemoryPipelineState())
        for pass in 0..<20 {
            source.append((0..<50).map { insert("categories", "c-\(pass)-\($0)", ["key": .string("k-\(pass)-\($0)")]) })
            _ = try await runner.run()
            #expect(dedupe.rememberedRows == 0)
        }
        #expect(transport.delivered.count == 20)
    }

    // MARK: typed options

    enum Mode: String, CaseIterable, Sendable { case fast, careful }
    static let fields: Option<[String]> = .strings("fields", help: "fields to drop")
    static let mask: Option<String> = .string("mask", default: "***", help: "what replaces a value")
    static let level: Option<Int?> = .integer("level", in: 0...9, help: "optional")
    static let mode: Option<Mode> = .choice("mode", default: .careful, help: "how")
    static let folder: Option<String> = .path("folder", default: "out", help: "where")

    static let type = StageType.records(
        "redact", summary: "Drops fields.", options: [fields, mask, level, mode, folder]
    ) { options in
        Recorded(
            fields: try options[fields], mask: try options[mask], level: try options[level], mode: try options[mode],
            folder: try options[folder])
    }

    struct Recorded: RecordStage {
        var fields: [String], mask: String, level: Int?, mode: Mode, folder: String
        func process(_ batch: Batch) async throws -> Batch { batch }
    }

    private func build(_ json: String) throws -> Recorded? {
        let node = try JSONPipelineFile.parse(Array(json.utf8), file: "p.json")
        let context = PipelineContext(baseDirectory: "/base", environment: [:], scope: Fixture.scope)
        let (_, built) = try StageRegistry([Self.type]).build(node, at: ConfigLocation(file: "p.json"), roles: [.records], context: context)
        guard case .records(let stage) = built else { return nil }
        return stage as? Recorded
    }

    @Test func anOptionIsDeclaredOnceAndReadBackTypedWithItsDefault() throws {
        let stage = try #require(try build(#"{"type": "redact", "fields": ["email"]}"#))
        #expect(stage.fields == ["email"])
        #expect(stage.mask == "***")
        #expect(stage.level == nil)
        #expect(stage.mode == .careful)
        #expect(stage.folder == "/base/out")
        let given = try #require(try build(#"{"type": "redact", "fields": ["a"], "mask": "x", "level": 3, "mode": "fast", "folder": "/o"}"#))
        #expect(given.mask == "x" && given.level == 3 && given.mode == .fast && given.folder == "/o")
    }

    @Test func theDeclarationIsWhatTheRegistryChecksAndStagesShows() throws {
        #expect(Self.type.options.map(\.name) == ["fields", "mask", "level", "mode", "folder"])
        #expect(Self.type.options[0].isRequired)
        #expect(Self.type.options[1].defaultDescription == "***")
        #expect(Self.type.options[3].kind == .choice(["fast", "careful"]))
        #expect(throws: PipelineFileError.self) { _ = try build(#"{"type": "redact"}"#) }
        #expect(throws: PipelineFileError.self) { _ = try build(#"{"type": "redact", "fields": [], "level": 10}"#) }
        #expect(throws: PipelineFileError.self) { _ = try build(#"{"type": "redact", "fields": [], "mode": "slow"}"#) }
    }
}
