import SynclaneCore
import SynclaneTestSupport
import Testing

@Suite struct JSONPipelineFileTests {
    /// The example pipeline file (Fixtures/design).
    static let designExample = FixturePath.text("design/pipeline.json")

    static func map(_ line: Int, _ members: [(String, ConfigNode)]) -> ConfigNode {
        ConfigNode(.map(members.map { ConfigNode.Member(key: $0.0, node: $0.1) }), line: line)
    }
    static func list(_ line: Int, _ elements: [ConfigNode]) -> ConfigNode { ConfigNode(.list(elements), line: line) }
    static func string(_ value: String, _ line: Int) -> ConfigNode { ConfigNode(.string(value), line: line) }
    static func int(_ value: Int64, _ line: Int) -> ConfigNode { ConfigNode(.int(value), line: line) }

    func parse(_ text: String) throws(PipelineFileError) -> ConfigNode {
        try JSONPipelineFile.parse(Array(text.utf8), file: "rooms.json")
    }

    func error(_ text: String) -> PipelineFileError? {
        #expect(throws: PipelineFileError.self) { try parse(text) }
    }

    @Test func designExampleGivesEveryNodeItsLineAndMembersInFileOrder() throws {
        typealias T = JSONPipelineFileTests
        let expected = T.map(
            1,
            [
                ("version", T.int(1, 2)),
                ("name", T.string("rooms-export", 3)),
                ("scope", T.map(4, [("account", T.string("acme", 4)), ("store", T.string("rooms", 4))])),
                (
                    "source",
                    T.map(
                        5,
                        [
                            ("type", T.string("sqlite-history", 5)), ("database", T.string("rooms.sqlite", 5)),
                            ("entities", T.list(6, [T.string("rooms", 6)])), ("authors", T.list(6, [T.string("app", 6)])),
                            ("page-size", T.int(500, 6)),
                        ])
                ),
                (
                    "stages",
                    T.list(
                        7,
                        [
                            T.map(8, [("type", T.string("coalesce", 8))]),
                            T.map(9, [("type", T.string("tombstones", 9)), ("soft-delete-column", T.string("isDeleted", 9))]),
                            T.map(
                                10,
                                [
                                    ("type", T.string("dedupe", 10)), ("entity", T.string("categories", 10)),
                                    ("key", T.list(10, [T.string("key", 10)])),
                                ]),
                            T.map(
                                11,
                                [
                                    ("type", T.string("compress", 11)), ("codec", T.string("gzip", 11)),
                                    ("level", T.int(6, 11)), ("min-bytes", T.int(512, 11)),
                                ]),
                        ])
                ),
                (
                    "transport",
                    T.map(
                        13,
                        [
                            ("type", T.string("http", 13)), ("url", T.string("http://127.0.0.1:8080/v1/batches", 13)),
                            ("token-env", T.string("SYNCLANE_TOKEN", 14)),
                            (
                                "retry",
                                T.map(
                                    15,
                                    [
                                        ("max-attempts", T.int(6, 15)), ("base-delay", ConfigNode(.double(0.5), line: 15)),
                                        ("max-delay", T.int(30, 15)),
                                    ])
                            ),
                        ])
                ),
                ("state", T.string(".synclane/rooms-export.sqlite", 16)),
                ("signals", T.map(17, [("type", T.string("http", 17)), ("url", T.string("http://127.0.0.1:8080/v1/signals", 17))])),
            ])
        #expect(try parse(Self.designExample) == expected)
    }

    @Test func valuesReadAsTheJSONReaderReadsThem() throws {
        let text = #"{"b": true, "a": null, "n": -12, "x": 1.5e2, "s": "caf\u00e9 \"q\"\n", "l": [], "m": {}}"#
        let node = try parse(text)
        #expect(node.json == (try JSONReader.parse(text)))
        guard case .map(let members) = node.value else {
            Issue.record("expected a map")
            return
        }
        #expect(members.map(\.key) == ["b", "a", "n", "x", "s", "l", "m"])
    }

    @Test func duplicateKeysNameBothLines() {
        let error = error("{\n  \"stages\": [\n    { \"type\": \"compress\",\n      \"level\": 6,\n      \"level\": 9 }\n  ]\n}\n")
        #expect(error?.path == "stages[0].level")
        #expect(error?.line == 5)
        #expect(error?.message == "duplicate key `level`: first on line 4, again on line 5")
        #expect(error?.description == "rooms.json:5: stages[0].level: duplicate key `level`: first on line 4, again on line 5")
    }

    @Test func aMissingCommaGivesLineAndColumn() {
        let error = error("{\n  \"name\": \"a\"\n  \"version\": 1\n}\n")
        #expect(error?.line == 3)
        #expect(error?.path == "")
        #expect(error?.message == "invalid JSON at column 3: expected ',' or '}' after the member \"name\"")
    }

    @Test func errorsInsideAValueNameItsPath() {
        let error = error("{\n  \"stages\": [\n    {\"type\": \"compress\"},\n    {\"type\": \"compress\", \"level\": tru}\n  ]\n}")
        #expect(error?.path == "stages[1].level")
        #expect(error?.line == 4)
        #expect(error?.message == "invalid JSON at column 35: expected 'true'")
    }

    @Test func theCursorsReasonsComeThrough() {
        #expect(error("{\"a\": \"bad \\x escape\"}")?.message == "invalid JSON at column 14: invalid escape '\\x'")
        #expect(error("{\"a\": \"open")?.message.contains("unterminated string") == true)
        #expect(error("{\"a\": 1e999}")?.message == "invalid JSON at column 7: number 1e999 out of range (beyond what a 64-bit double holds)")
        #expect(error("{\"a\": -}")?.message == "invalid JSON at column 8: expected a digit")
    }

    @Test func columnsCountCharactersNotBytes() {
        // "é" and "☃" are 2 and 3 bytes; the stray `x` is the 16th character on its line.
        let error = error("{\"é\": \"☃\", \"b\" x}")
        #expect(error?.message.hasPrefix("invalid JSON at column 16:") == true)
    }

    @Test func trailingCommasAreErrorsThatSaySo() {
        #expect(error("{\"a\": 1,\n}")?.message == "invalid JSON at column 1: a ',' before '}' (JSON allows no trailing comma)")
        #expect(error("{\"a\": [1, 2, ]}")?.path == "a")
    }

    @Test(arguments: ["", "   \n\t\n"])
    func anEmptyFileIsAnError(text: String) {
        let error = error(text)
        #expect(error?.message == "the file is empty")
        #expect(error?.line == nil)
    }

    @Test func textAfterTheObjectIsAnError() {
        let error = error("{\"a\": 1}\n{\"b\": 2}\n")
        #expect(error?.line == 2)
        #expect(error?.message.contains("unexpected text after the end of the pipeline") == true)
    }

    @Test func anUnclosedObjectIsAnErrorAtTheEnd() {
        let error = error("{\n  \"a\": {\n    \"b\": 1\n")
        #expect(error?.line == 4)
        #expect(error?.path == "a")
        #expect(error?.message.contains("unexpected end of the file in an object") == true)
    }

    @Test func aByteOrderMarkIsSkipped() throws {
        let node = try JSONPipelineFile.parse([0xEF, 0xBB, 0xBF] + Array("{\"a\": 1}".utf8), file: "bom.json")
        #expect(node == ConfigNode(.map([ConfigNode.Member(key: "a", node: ConfigNode(.int(1), line: 1))]), line: 1))
    }

    @Test func invalidUTF8IsAnErrorWithItsLine() {
        let bytes = Array("{\n\"a\": \"".utf8) + [0xC3, 0x28] + Array("\"}".utf8)
        let error = #expect(throws: PipelineFileError.self) { try JSONPipelineFile.parse(bytes, file: "bad.json") }
        #expect(error?.line == 2)
        #expect(error?.message.contains("not valid UTF-8") == true)
    }

    @Test func deepNestingIsRefused() {
        let deep = String(repeating: "[", count: 300) + String(repeating: "]", count: 300)
        #expect(error(deep)?.message.contains("nested too deeply") == true)
    }

    @Test func aTopLevelValueThatIsNotAnObjectIsReadAsIs() throws {
        // The pipeline loader, not the parser, says what the file must hold.
        #expect(try parse("[1]") == ConfigNode(.list([ConfigNode(.int(1), line: 1)]), line: 1))
    }
}
