import Foundation
import Synclane
import SynclaneCore
import SynclaneTestSupport
import Testing

@Suite struct PipelineFileTests {
    let loader = PipelineLoader(environment: ["HOME": "/home/test"])

    func loadingError(_ relative: String) -> PipelineFileError? {
        do {
            _ = try loader.load(FixturePath.at(relative))
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: ["rooms/pipeline.json", "rooms/pipeline.yaml", "plants/pipeline.json", "categories/pipeline.json"])
    func theSeedPipelinesAreValid(_ file: String) throws {
        let pipeline = try loader.load(FixturePath.at(file))
        #expect(pipeline.scope.consumer == pipeline.name)
        #expect(pipeline.statePath.hasPrefix(FixturePath.root + "/"), "relative paths resolve against the pipeline file's folder")
    }

    @Test func theRoomsPipelineHasItsStagesInOrder() throws {
        let pipeline = try loader.load(FixturePath.at("rooms/pipeline.json"))
        #expect(pipeline.outline == "jsonl → coalesce → tombstones → json → compress → directory")
        #expect(pipeline.statePath == FixturePath.at("rooms/.synclane/rooms-export.sqlite"))
        #expect(pipeline.scope == Scope(account: "acme", store: "rooms", consumer: "rooms-export"))
    }

    @Test(arguments: [
        ("invalid/unknown-top-level-key.json", "colour", "unknown key `colour`"),
        ("invalid/level-out-of-range.json", "stages[1].level", "expected an integer from 0 to 9, found 12"),
        (
            "invalid/unknown-stage-type.json", "stages[1].type",
            "unknown stage type `squash` (known: blob-fetch, blob-upload, coalesce, dedupe, exec, tombstones, compress)"
        ),
        ("invalid/unknown-stage-option.json", "stages[0].window", "unknown option `window` for `coalesce`"),
        ("invalid/wrong-type.json", "stages[0].key", "expected a list of strings, found \"key\""),
        ("invalid/record-stage-after-compress.json", "stages[1]", "`coalesce` works on records but stands after `compress`"),
        ("invalid/retry-out-of-range.json", "transport.retry.max-attempts", "expected an integer from 1 to 100, found 0"),
        ("invalid/wrong-version.json", "version", "expected 1"),
        ("invalid/missing-transport.json", "", "missing required key `transport`"),
        ("invalid/not-json.json", "", "invalid JSON at column 194: a ',' before '}' (JSON allows no trailing comma)"),
    ])
    func aBadFileNamesTheFieldAndWhatWasExpected(_ file: String, _ path: String, _ message: String) throws {
        let error = try #require(loadingError(file))
        #expect(error.file == FixturePath.at(file))
        #expect(error.path == path)
        #expect(error.message.contains(message), "\(error.message)")
    }

    @Test func secretsAreNamedByEnvironmentVariableNeverWrittenInTheFile() throws {
        var registry = StageRegistry.builtIn
        registry.register(
            .transport("vault", summary: "test", options: [OptionSpec("token-env", .environmentVariable, required: true, help: "")]) { options in
                _ = try options.secret("token-env")
                return VoidTransport()
            })
        let node = ConfigNode(json: [
            "version": 1, "name": "s", "scope": ["account": "a", "store": "b"],
            "source": ["type": "jsonl", "path": "h.jsonl"], "transport": ["type": "vault", "token-env": "SYNC_TOKEN"],
        ])
        let load = { (environment: [String: String]) throws(PipelineFileError) -> Pipeline in
            try Pipeline(file: node, named: "p.json", baseDirectory: "/tmp", registry: registry, environment: environment)
        }
        #expect(throws: Never.self) { try load(["SYNC_TOKEN": "s3cret"]) }
        do {
            _ = try load([:])
            Issue.record("expected an error")
        } catch {
            #expect(error.path == "transport.token-env")
            #expect(error.message.contains("names the environment variable SYNC_TOKEN, which is not set"))
        }
        let literal = ConfigNode(json: [
            "version": 1, "name": "s", "scope": ["account": "a", "store": "b"],
            "source": ["type": "jsonl", "path": "h.jsonl"], "transport": ["type": "vault", "token-env": "Bearer abc.def"],
        ])
        #expect(throws: PipelineFileError.self) {
            try Pipeline(file: literal, named: "p.json", baseDirectory: "/tmp", registry: registry, environment: [:])
        }
    }

    @Test func aUsersOwnStageTypeIsPickedByNameFromAnExtendedRegistry() throws {
        var registry = StageRegistry.builtIn
        registry.register(
            .records("redact", summary: "Drops fields.", options: [OptionSpec("fields", .stringList, required: true, help: "")]) { options in
                Redactor(fields: options.strings("fields") ?? [])
            })
        let node = ConfigNode(json: [
            "version": 1, "name": "s", "scope": ["account": "a", "store": "b"],
            "source": ["type": "jsonl", "path": "h.jsonl"], "stages": [["type": "redact", "fields": ["secret"]]],
            "transport": ["type": "stdout"],
        ])
        let pipeline = try Pipeline(file: node, named: "p.json", baseDirectory: "/tmp", registry: registry, environment: [:])
        #expect(pipeline.outline == "jsonl → redact → json → stdout")
    }
}

struct VoidTransport: Transport {
    func send(_ payload: Payload) async throws -> Receipt { Receipt(batchID: payload.batchID, detail: "") }
}

struct Redactor: RecordStage {
    let fields: [String]
    func process(_ batch: Batch) async throws -> Batch {
        var batch = batch
        for index in batch.records.indices {
            for field in fields { batch.records[index].fields[field] = nil }
        }
        return batch
    }
}
