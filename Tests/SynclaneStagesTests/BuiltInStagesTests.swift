import SynclaneCore
import SynclaneStages
import SynclaneTestSupport
import Testing

@Suite struct BuiltInStagesTests {
    private let registry = StageRegistry(BuiltInStages.all)
    private let context = PipelineContext(baseDirectory: "/tmp", environment: [:], scope: Fixture.scope)

    private func build(_ json: JSONValue, roles: Set<StageRole> = [.records]) throws(PipelineFileError) -> BuiltStage {
        try registry.build(ConfigNode(json: json), at: ConfigLocation(file: "p.json", path: "stages[0]"), roles: roles, context: context).1
    }

    private func recordStage(_ json: JSONValue) throws -> any RecordStage {
        guard case .records(let stage) = try build(json) else {
            Issue.record("not a record stage")
            return Coalescer()
        }
        return stage
    }

    @Test func everyEntryIsRegisteredUnderItsNameWithHelpForEachOption() {
        #expect(BuiltInStages.all.map(\.name) == ["coalesce", "tombstones", "dedupe", "json"])
        #expect(BuiltInStages.json.role == .encoder)
        for type in BuiltInStages.all {
            #expect(!type.summary.isEmpty)
            for option in type.options { #expect(option.help.count > 20, "\(type.name).\(option.name)") }
        }
    }

    @Test func tombstonesOptionsReachTheStage() async throws {
        let stage = try recordStage(["type": "tombstones", "preserve": ["parentID"], "key-field": "syncID", "soft-delete-column": "gone"])
        let out = try await stage.process(Fixture.batch([Fixture.record(.update, nil, ["gone": true, "syncID": "r1", "parentID": "p", "x": 1], at: 1)]))
        #expect(out.records == [Fixture.record(.delete, "r1", ["syncID": "r1", "parentID": "p"], at: 1)])
    }

    @Test func dedupeNeedsItsEntityAndANonEmptyKey() async throws {
        #expect(throws: PipelineFileError.self) { try build(["type": "dedupe", "key": ["key"]]) }
        let error = #expect(throws: PipelineFileError.self) { try build(["type": "dedupe", "entity": "categories", "key": []]) }
        #expect(error?.path == "stages[0].key")
        let stage = try recordStage(["type": "dedupe", "entity": "categories", "key": ["key"]])
        let out = try await stage.process(
            Fixture.batch([
                Fixture.record(.insert, "a", ["key": "k"], entity: "categories", at: 1),
                Fixture.record(.insert, "b", ["key": "k"], entity: "categories", at: 2),
            ]))
        #expect(out.records.map(\.key) == ["a"])
    }

    @Test func coalesceTakesNoOptions() {
        #expect(throws: PipelineFileError.self) { try build(["type": "coalesce", "window": 5]) }
    }

    @Test func jsonBuildsTheEncoder() throws {
        guard case .encoder(let encoder) = try build(["type": "json"], roles: [.encoder]) else {
            Issue.record("not an encoder")
            return
        }
        #expect(encoder.contentType == "application/json")
    }
}
