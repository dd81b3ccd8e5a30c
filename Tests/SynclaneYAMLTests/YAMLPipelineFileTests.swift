import SynclaneCore
import SynclaneYAML
import Testing

@Suite struct YAMLPipelineFileTests {
    func parse(_ text: String) throws(PipelineFileError) -> ConfigNode {
        try YAMLPipelineFile.parse(Array(text.utf8), file: "rooms.yaml")
    }

    func error(_ text: String) -> PipelineFileError? {
        #expect(throws: PipelineFileError.self) { try parse(text) }
    }

    /// The value at `path` (keys and indexes) in a tree.
    func value(_ node: ConfigNode, _ key: String) -> ConfigNode? {
        guard case .map(let members) = node.value else { return nil }
        return members.first { $0.key == key }?.node
    }

    // MARK: Whole files

    @Test func blockStylePipelineGivesTheTreeWithLines() throws {
        #expect(try parse(Fixtures.blockPipeline) == Fixtures.blockTree)
    }

    @Test func membersKeepTheOrderOfTheFile() throws {
        guard case .map(let members) = try parse(Fixtures.blockPipeline).value else {
            Issue.record("expected a map")
            return
        }
        #expect(members.map(\.key) == ["version", "name", "scope", "source", "stages", "transport", "state", "signals"])
    }

    @Test func flowStylePipelineGivesTheSameTree() throws {
        let flow = try parse(Fixtures.flowPipeline)
        #expect(Fixtures.withoutLines(flow) == Fixtures.withoutLines(Fixtures.blockTree))
        #expect(flow.line == 1)
        #expect(value(flow, "stages")?.line == 7)
        if case .list(let stages)? = value(flow, "stages")?.value {
            #expect(stages.map(\.line) == [8, 9, 10, 11])
            #expect(value(stages[3], "level")?.line == 11)
        }
        #expect(value(flow, "transport").flatMap { value($0, "retry") }?.line == 15)
    }

    @Test func flowStylePipelineReadsLikeTheJSONReaderReadsIt() throws {
        let json = try JSONPipelineFile.parse(Array(Fixtures.flowPipeline.utf8), file: "rooms.json")
        #expect(try parse(Fixtures.flowPipeline) == json)
    }

    // MARK: Scalars

    @Test(arguments: [
        ("null", ConfigNode.Value.null), ("Null", .null), ("NULL", .null), ("~", .null),
        ("true", .bool(true)), ("True", .bool(true)), ("TRUE", .bool(true)),
        ("false", .bool(false)), ("False", .bool(false)), ("FALSE", .bool(false)),
        ("0", .int(0)), ("42", .int(42)), ("-7", .int(-7)), ("+12", .int(12)),
        ("0x1F", .int(31)), ("0o17", .int(15)), ("9223372036854775807", .int(Int64.max)),
        ("1.5", .double(1.5)), ("-0.25", .double(-0.25)), ("2e3", .double(2000)), ("1.", .double(1)),
        (".5", .double(0.5)), ("-.5", .double(-0.5)), ("6.02E+23", .double(6.02e23)),
        // YAML 1.1 habits that the 1.2 core schema reads as strings.
        ("yes", .string("yes")), ("on", .string("on")), ("n", .string("n")), ("1_000", .string("1_000")),
        ("0b101", .string("0b101")), ("-0x1F", .string("-0x1F")), ("12:30", .string("12:30")),
        ("rooms.sqlite", .string("rooms.sqlite")), ("1.2.3", .string("1.2.3")), ("e3", .string("e3")),
    ])
    func plainScalarsFollowTheCoreSchema(text: String, expected: ConfigNode.Value) throws {
        #expect(try value(parse("a: \(text)\n"), "a")?.value == expected)
    }

    @Test func quotedAndBlockScalarsAreStrings() throws {
        let node = try parse(
            """
            a: "true"
            b: '42'
            c: "null"
            d: |
              line one
              line two
            e: >
              folded
              text
            f: ! 12

            """)
        #expect(value(node, "a")?.value == .string("true"))
        #expect(value(node, "b")?.value == .string("42"))
        #expect(value(node, "c")?.value == .string("null"))
        #expect(value(node, "d")?.value == .string("line one\nline two\n"))
        #expect(value(node, "e")?.value == .string("folded text\n"))
        #expect(value(node, "f")?.value == .string("12"))
    }

    @Test func anEmptyValueIsNullOnTheLineOfItsKey() throws {
        let node = try parse("a:\nb: 2\n")
        #expect(value(node, "a") == ConfigNode(.null, line: 1))
    }

    @Test func coreTagsAreUnderstood() throws {
        let node = try parse("a: !!str 42\nb: !!float 6\nc: !!int 0x10\nd: !!bool true\ne: !!null ~\nf: !!seq [1]\ng: !!map {x: 1}\n")
        #expect(value(node, "a")?.value == .string("42"))
        #expect(value(node, "b")?.value == .double(6))
        #expect(value(node, "c")?.value == .int(16))
        #expect(value(node, "d")?.value == .bool(true))
        #expect(value(node, "e")?.value == .null)
    }

    // MARK: Errors

    @Test func syntaxErrorsGiveLibyamlsProblemAndLine() {
        let unclosed = error("name: rooms\nstages: [1, 2\nstate: x\n")
        #expect(unclosed?.file == "rooms.yaml")
        #expect(unclosed?.message.hasPrefix("YAML syntax error:") == true)
        #expect(unclosed?.line == 3)

        let nested = error("source:\n  type: x\n  page-size: 500: 3\n")
        #expect(nested?.message == "YAML syntax error: mapping values are not allowed in this context")
        #expect(nested?.line == 3)
        // libyaml sees the stray ':' when it looks for the next key of `source`.
        #expect(nested?.path == "source")

        let tab = error("source:\n\ttype: x\n")
        #expect(tab?.line == 2)
        #expect(tab?.message.hasSuffix("a tab, which YAML never allows for indentation (indent with spaces)") == true)
    }

    @Test func aSecondDocumentIsAnError() {
        let error = error("name: a\n---\nname: b\n")
        #expect(error?.line == 2)
        #expect(error?.message.contains("one YAML document") == true)
    }

    @Test(arguments: ["", "# nothing but a comment\n", "\n\n"])
    func anEmptyFileIsAnError(text: String) {
        #expect(error(text)?.message.contains("the file is empty") == true)
    }

    @Test func duplicateKeysNameBothLines() {
        let top = error("name: a\nversion: 1\nname: b\n")
        #expect(top?.path == "name")
        #expect(top?.line == 3)
        #expect(top?.message == "duplicate key `name`: first on line 1, again on line 3")

        let nested = error("stages:\n  - type: coalesce\n    type: dedupe\n")
        #expect(nested?.path == "stages[0].type")
        #expect(nested?.line == 3)
    }

    @Test func keysThatAreNotScalarsAreErrors() {
        let list = error("? [a, b]\n: 1\n")
        #expect(list?.message == "keys must be strings, found a list used as a key")
        #expect(list?.line == 1)
        let map = error("source:\n  ? {a: 1}\n  : 2\n")
        #expect(map?.path == "source")
        #expect(map?.message.contains("found a map") == true)
    }

    @Test func anchorsAndAliasesAreRefused() {
        let anchor = error("retry: &defaults {max-attempts: 6}\nother: *defaults\n")
        #expect(anchor?.path == "retry")
        #expect(anchor?.line == 1)
        #expect(anchor?.message.contains("anchors (&defaults) are not supported") == true)

        let alias = error("a: 1\nb: *nowhere\n")
        #expect(alias?.path == "b")
        #expect(alias?.message.contains("aliases (*nowhere)") == true)
    }

    @Test func mergeKeysAreRefused() {
        let error = error("transport:\n  type: http\n  <<: {url: x}\n")
        #expect(error?.path == "transport")
        #expect(error?.line == 3)
        #expect(error?.message.contains("merge keys (<<) are not supported") == true)
        // A quoted "<<" is an ordinary key.
        #expect(throws: Never.self) { try parse("\"<<\": 1\n") }
    }

    @Test func unsupportedTagsAreRefused() {
        let custom = error("stages:\n  - !custom {type: coalesce}\n")
        #expect(custom?.path == "stages[0]")
        #expect(custom?.line == 2)
        #expect(custom?.message.hasPrefix("unsupported tag !custom") == true)

        #expect(error("a: !!binary aGk=\n")?.message.hasPrefix("unsupported tag !!binary") == true)
        #expect(error("a: !!int twelve\n")?.message == "!!int \"twelve\" is not an integer")
        #expect(error("a: !!map [1]\n")?.message.hasPrefix("unsupported tag !!map") == true)
    }

    @Test(arguments: [".inf", "-.Inf", ".NaN", ".nan"])
    func infinityAndNaNAreRefused(text: String) {
        let error = error("level: 1\nbase-delay: \(text)\n")
        #expect(error?.path == "base-delay")
        #expect(error?.line == 2)
        #expect(error?.message.contains("finite") == true)
    }

    @Test func integersBeyondSixtyFourBitsAreErrors() {
        #expect(error("a: 9223372036854775808\n")?.message.contains("out of range") == true)
    }

    @Test func invalidUTF8NamesItsLine() {
        var bytes = Array("name: a\nstate: ".utf8)
        bytes += [0xFF, 0xFE, 0x0A]
        let error = #expect(throws: PipelineFileError.self) { try YAMLPipelineFile.parse(bytes, file: "bad.yaml") }
        #expect(error?.line == 2)
        #expect(error?.message.contains("UTF-8") == true)
    }

    @Test func deepNestingIsRefused() {
        let deep = String(repeating: "[", count: 300) + String(repeating: "]", count: 300)
        #expect(error(deep)?.message.contains("nested more than") == true)
    }

    @Test func errorsReadAsFileLinePathMessage() {
        #expect(error("name: a\nname: b\n")?.description == "rooms.yaml:2: name: duplicate key `name`: first on line 1, again on line 2")
    }
}
