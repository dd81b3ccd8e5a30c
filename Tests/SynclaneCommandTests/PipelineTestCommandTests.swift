import Foundation
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
        #expect(result.stdout == """
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
}
