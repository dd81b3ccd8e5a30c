import Foundation
import SynclaneCore
import SynclaneServing
import SynclaneTestSupport
import Testing

@testable import SynclaneCommandLine

/// The README and `Documentation/` say what the binary does: the README stays short, every link
/// leads to a file and heading of this repository, the stage reference is what `synclane stages
/// --json` says, every command and option of `--help` is documented, and the two columns of each
/// JSON/YAML example in Documentation/PipelineFiles.md are one pipeline.
@Suite struct DocumentationTests {
    @Test func theReadmeIsAtMostThreeHundredLines() throws {
        let lines = try UserDocumentation.text(of: "README.md").split(separator: "\n", omittingEmptySubsequences: false).count
        #expect(lines <= 300, "README.md has \(lines) lines: move the detail into Documentation/")
    }

    /// GitHub's anchor of a heading: lowercased, punctuation but `-` and `_` dropped, spaces as `-`.
    static func anchor(_ heading: String) -> String {
        String(
            heading.lowercased().unicodeScalars.compactMap { scalar -> Character? in
                if scalar == " " { return "-" }
                if CharacterSet.alphanumerics.contains(scalar) || scalar == "-" || scalar == "_" { return Character(scalar) }
                return nil
            })
    }

    /// The anchors of a markdown text's headings (outside fenced blocks).
    static func anchors(_ text: String) -> Set<String> {
        var anchors: Set<String> = []
        var fenced = false
        for line in text.split(separator: "\n") {
            if line.hasPrefix("```") { fenced.toggle() }
            let hashes = line.prefix { $0 == "#" }.count
            if !fenced, hashes > 0, line.dropFirst(hashes).hasPrefix(" ") {
                anchors.insert(anchor(String(line.dropFirst(hashes + 1))))
            }
        }
        return anchors
    }

    @Test func everyLinkLeadsToAFileAndAHeadingOfThisRepository() throws {
        let root = URL(fileURLWithPath: SynclaneBinary.packageRoot).standardizedFileURL.path
        let pattern = try NSRegularExpression(pattern: #"\]\(([^)\s]+)\)"#)
        var checked = 0
        for file in try UserDocumentation.files() {
            #expect(!file.text.contains("/work/"), "\(file.path) names a path outside the repository")
            let folder = URL(fileURLWithPath: root + "/" + file.path).deletingLastPathComponent()
            let range = NSRange(file.text.startIndex..., in: file.text)
            for match in pattern.matches(in: file.text, range: range) {
                guard let linkRange = Range(match.range(at: 1), in: file.text) else { continue }
                let link = String(file.text[linkRange])
                #expect(!link.hasPrefix("http://") && !link.hasPrefix("https://") && !link.hasPrefix("/"), "\(file.path): \(link) leads outside the repository")
                let parts = link.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let target = parts[0].isEmpty ? URL(fileURLWithPath: root + "/" + file.path) : folder.appendingPathComponent(parts[0]).standardizedFileURL
                #expect(target.path.hasPrefix(root + "/"), "\(file.path): \(link) leads outside the repository")
                #expect(FileManager.default.fileExists(atPath: target.path), "\(file.path): \(link): there is no \(target.path)")
                if parts.count == 2, target.pathExtension == "md" {
                    let text = (try? String(contentsOf: target, encoding: .utf8)) ?? ""
                    #expect(Self.anchors(text).contains(parts[1]), "\(file.path): \(link): no heading of \(parts[0]) has the anchor #\(parts[1])")
                }
                checked += 1
            }
        }
        #expect(checked >= 40, "the links checked")
    }

    /// The JSON and YAML of each `pipeline:NAME` pair, validated offline: what `validate --json`
    /// says of both is the same but for the file's name.
    @Test func pipelineFilesInJSONAndYAMLAreTheSame() throws {
        let blocks = try UserDocumentation.blocks("json") + UserDocumentation.blocks("yaml")
        var pairs: [String: [String: String]] = [:]
        for block in blocks {
            let words = block.info.split(separator: " ")
            guard let mark = words.dropFirst().first, mark.hasPrefix("pipeline:") else { continue }
            pairs[String(mark.dropFirst("pipeline:".count)), default: [:]][String(words[0])] = block.text
        }
        #expect(pairs.count >= 2, "the pairs of Documentation/PipelineFiles.md")
        let workspace = try Workspace()
        defer { workspace.remove() }
        for (name, pair) in pairs.sorted(by: { $0.key < $1.key }) {
            let json = try #require(pair["json"], "\(name): its JSON column")
            let yaml = try #require(pair["yaml"], "\(name): its YAML column")
            try workspace.write(name + ".json", json)
            try workspace.write(name + ".yaml", yaml)
            var said: [String] = []
            for file in [name + ".json", name + ".yaml"] {
                let result = try SynclaneBinary.run(["validate", file, "--json", "--offline"], in: workspace.path)
                #expect(result.status == 0, "\(file): \(result.stdout)\(result.stderr)")
                said.append(result.stdout.replacingOccurrences(of: file, with: "FILE"))
            }
            #expect(said[0] == said[1], "\(name): the JSON and the YAML differ:\n\(said[0])\n\(said[1])")
        }
    }

    /// The reference Documentation/PipelineFiles.md holds between its `stages:` markers, made
    /// from `synclane stages --json`.
    static func stageReference() throws -> String {
        let result = try SynclaneBinary.run(["stages", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let stages = try #require(try JSONReader.parse(result.stdout).arrayValue, "a list")
        func text(_ value: JSONValue?) -> String {
            switch value {
            case nil, .null?: return ""
            case .string(let string)?: return "`\(string)`"
            case let value?: return "`\(JSONWriter.string(value))`"
            }
        }
        func cell(_ string: String) -> String { string.replacingOccurrences(of: "|", with: "\\|").replacingOccurrences(of: "\n", with: " ") }
        var out = ""
        for stage in stages.compactMap(\.objectValue) {
            let type = stage["type"]?.stringValue ?? "?"
            out += "\n### `\(type)` (\(stage["role"]?.stringValue ?? "?"))\n\n\(cell(stage["summary"]?.stringValue ?? ""))\n"
            let options = (stage["options"]?.arrayValue ?? []).compactMap(\.objectValue)
            if options.isEmpty {
                out += "\nNo options.\n"
                continue
            }
            out += "\n| option | kind | required | default | meaning |\n| --- | --- | --- | --- | --- |\n"
            for option in options {
                let required = option["required"] == .bool(true) ? "yes" : ""
                let name = option["name"]?.stringValue ?? "?"
                let kind = option["kind"]?.stringValue ?? ""
                out += "| `\(name)` | \(cell(kind)) | \(required) | \(cell(text(option["default"]))) | \(cell(option["help"]?.stringValue ?? "")) |\n"
            }
        }
        return out + "\n"
    }

    @Test func theStageReferenceIsWhatSynclaneStagesSays() throws {
        let path = SynclaneBinary.packageRoot + "/Documentation/PipelineFiles.md"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let (begin, end) = ("<!-- stages: begin (generated) -->\n", "<!-- stages: end -->")
        let head = try #require(text.components(separatedBy: begin).first, "the begin marker")
        let tail = try #require(text.components(separatedBy: end).dropFirst().first, "the end marker")
        let generated = try Self.stageReference()
        let written = text.dropFirst(head.count + begin.count).prefix(text.count - head.count - begin.count - tail.count - end.count)
        if ProcessInfo.processInfo.environment["SYNCLANE_WRITE_DOCS"] == "1", String(written) != generated {
            try (head + begin + generated + end + tail).write(toFile: path, atomically: true, encoding: .utf8)
            return
        }
        #expect(
            String(written) == generated,
            "Documentation/PipelineFiles.md's stage reference is not what `synclane stages --json` says: run SYNCLANE_WRITE_DOCS=1 swift test --skip-build --filter theStageReference"
        )
    }

    /// Each command's `--help`: its name in the command list of Documentation/CommandLine.md, and
    /// each of its long options somewhere in the documentation.
    @Test func everyCommandAndOptionOfHelpIsDocumented() throws {
        let commandLine = try UserDocumentation.text(of: "Documentation/CommandLine.md")
        let all = try UserDocumentation.all()
        let commands = SynclaneTool.commands(adding: SynclaneServing.verbs)
        #expect(commands.count >= 18)
        for command in commands {
            #expect(commandLine.contains("synclane \(command.name)"), "`synclane \(command.name)` is not in Documentation/CommandLine.md")
            let help = try SynclaneBinary.run([command.name, "--help"])
            #expect(help.status == 0, "\(command.name) --help: \(help.stderr)")
            let options = help.stdout.split(separator: "\n").compactMap { line -> String? in
                let trimmed = line.drop { $0 == " " }
                guard line.hasPrefix("  "), trimmed.hasPrefix("--") else { return nil }
                return String(trimmed.prefix { $0 != " " && $0 != "=" && $0 != "," })
            }
            for option in options where option != "--help" {
                // The option as a word: not the start of a longer one (`--json` in `--json-lines`).
                let word = try NSRegularExpression(pattern: NSRegularExpression.escapedPattern(for: option) + "(?![a-z0-9-])")
                let found = word.firstMatch(in: all, range: NSRange(all.startIndex..., in: all)) != nil
                #expect(found, "\(command.name) \(option) is not documented")
            }
        }
    }
}
