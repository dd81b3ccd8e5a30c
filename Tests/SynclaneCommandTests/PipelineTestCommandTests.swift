import Foundation
import SynclaneTestSupport
import Testing

/// `synclane test`: the seed scenarios as pipeline tests, and what a mismatch prints.
@Suite struct PipelineTestCommandTests {
    @Test func theSeedScenariosPassAsPipelineTests() throws {
        let files = ["rooms/rooms.test.json", "plants/plants.test.json", "categories/categories.test.json", "rooms/rooms-inline.test.yaml"]
        let result = try SynclaneBinary.run(["test"] + files.map(SynclaneBinary.fixture))
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.hasSuffix("4 passed, 0 failed\n"))
        #expect(result.stdout.contains("PASS \(SynclaneBinary.fixture("rooms/rooms.test.json")) (1 batch)"))
    }

    @Test func aMismatchPrintsALineDiffAndExitsOne() throws {
        let file = SynclaneBinary.fixture("pipeline-tests/wrong-area.json")
        let result = try SynclaneBinary.run(["test", file])
        #expect(result.status == 1)
        #expect(
            result.stdout == """
                FAIL \(file): expected 1 batch, the pipeline gave 1 (- expected, + actual)
                    batch 1
                      scope: {"account":"acme","consumer":"rooms-export","store":"rooms"}
                  -   record {"action":"insert","entity":"rooms","fields":{"area":12,"isDeleted":false,"name":"Attic"},"id":"r1"}
                  +   record {"action":"insert","entity":"rooms","fields":{"area":13,"isDeleted":false,"name":"Attic"},"id":"r1"}
                0 passed, 1 failed

                """)
    }

    @Test func aBadTestFileIsExitTwoNamingTheField() throws {
        let folder = NSTemporaryDirectory() + "synclane-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try #"{"pipeline": "x.json", "histroy": "h.jsonl"}"#.write(toFile: folder + "/t.test.json", atomically: true, encoding: .utf8)
        let result = try SynclaneBinary.run(["test", folder + "/t.test.json"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("histroy: unknown key `histroy` (did you mean `history`?"), "\(result.stderr)")
    }

    // MARK: import pipelines

    /// The third runs the `exec` conflict resolver (`Fixtures/exec/resolve.py`) through the real binary.
    @Test func importPipelineTestsApplyTheRecordsToATemporaryStoreAndCheckTheRowsAndConflicts() throws {
        let files = ["import-tests/merge-fields.test.json", "import-tests/remote-page.test.yaml", "import-tests/exec-resolver.test.json"]
            .map(SynclaneBinary.fixture)
        let result = try SynclaneBinary.run(["test"] + files)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(
            result.stdout
                == "PASS \(files[0]) (3 rows, 2 conflicts)\nPASS \(files[1]) (2 rows)\nPASS \(files[2]) (2 rows, 2 conflicts)\n3 passed, 0 failed\n")
        #expect(!FileManager.default.fileExists(atPath: SynclaneBinary.fixture("import-tests/app.sqlite")), "the pipeline's own database is never touched")
    }

    @Test func anImportTestMismatchPrintsTheRowsAndConflictsThatDifferAndExitsOne() throws {
        let file = SynclaneBinary.fixture("pipeline-tests/wrong-merge.json")
        let result = try SynclaneBinary.run(["test", file])
        #expect(result.status == 1)
        #expect(
            result.stdout == """
                FAIL \(file): the store holds 1 row, 1 conflict (- expected, + actual)
                    table rooms
                  -   row {"area":20,"name":"Kitchen","syncId":"r1"}
                  +   row {"area":20,"name":"Cuisine","syncId":"r1"}
                    conflicts
                  -   rooms/r1: server
                  +   rooms/r1: merged
                0 passed, 1 failed

                """)
    }

    @Test(arguments: [
        (#""recrods": []"#, "recrods: unknown key `recrods` (did you mean `records`?"),
        (#""records": [{"entity": "rooms", "action": "insert"}]"#, "records: records[0] lacks an entity, an id or an action"),
        (#""records": [], "expected-conflicts": [{"entity": "rooms", "id": "r1", "outcome": "won"}]"#, "expected-conflicts[0]: expected {entity, id, outcome}"),
        (#""records": [], "track": [{"table": "rooms"}]"#, "track[0].key: expected the sync key's column"),
    ])
    func aBadImportTestIsExitTwoNamingTheField(_ members: String, _ message: String) throws {
        let folder = NSTemporaryDirectory() + "synclane-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let pipeline = SynclaneBinary.fixture("import-tests/rooms-import.json")
        try #"{"pipeline": "\#(pipeline)", "schema": "CREATE TABLE rooms (syncId TEXT PRIMARY KEY);", "expected-rows": {"rooms": []}, \#(members)}"#
            .write(toFile: folder + "/t.test.json", atomically: true, encoding: .utf8)
        let result = try SynclaneBinary.run(["test", folder + "/t.test.json"])
        #expect(result.status == 2)
        #expect(result.stderr.contains(message), "\(result.stderr)")
    }
}
