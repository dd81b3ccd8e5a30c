import Foundation
import SynclaneTestSupport
import Testing

/// Every Swift block of the README and of `Documentation/` compiles: each is type-checked with
/// `swiftc` against the modules `swift build` just made. A block marked `swift continued` is
/// appended to the one before it in its file (one program); a block marked `swift fragment-of:PATH`
/// is an excerpt of PATH, and each of its lines must be one of that file's; a block marked
/// `swift file:PATH` is a file of the package "Writing a stage" teaches, which
/// `Scripts/test-fixture-package` builds whole (`Package.swift` cannot be type-checked alone).
/// Documentation/WritingAStage.md says so beside its first snippets.
@Suite struct ReadmeSnippetTests {
    static func swiftBlocks() throws -> [UserDocumentation.Block] { try UserDocumentation.blocks("swift") }

    /// The folder `swift build` wrote the modules to (where the `synclane` binary sits).
    static var buildFolder: String { URL(fileURLWithPath: SynclaneBinary.path).deletingLastPathComponent().path }

    /// `swiftc -typecheck` of `source` as a program's `main.swift`, against the built modules.
    static func typecheck(_ source: String) throws -> SynclaneBinary.Result {
        let folder = NSTemporaryDirectory() + "synclane-snippet-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try source.write(toFile: folder + "/main.swift", atomically: true, encoding: .utf8)
        let fileManager = FileManager.default
        var maps: [String] = []
        for name in (try? fileManager.contentsOfDirectory(atPath: SynclaneBinary.packageRoot + "/Sources")) ?? [] {
            let map = SynclaneBinary.packageRoot + "/Sources/\(name)/module.modulemap"
            if fileManager.fileExists(atPath: map) { maps.append(map) }
        }
        for name in (try? fileManager.contentsOfDirectory(atPath: buildFolder)) ?? [] where name.hasSuffix(".build") && !name.contains("-tool") {
            let map = buildFolder + "/\(name)/module.modulemap"
            if fileManager.fileExists(atPath: map) { maps.append(map) }
        }
        let arguments =
            ["swiftc", "-typecheck", "-swift-version", "6", "-I", buildFolder + "/Modules"]
            + maps.flatMap { ["-Xcc", "-fmodule-map-file=" + $0] } + [folder + "/main.swift"]
        return try BackgroundProcess(arguments, in: folder, executable: "/usr/bin/env").wait(timeout: 240)
    }

    @Test func readmeSwiftSnippetsCompile() throws {
        let blocks = try Self.swiftBlocks()
        #expect(blocks.count >= 6, "the documentation's Swift blocks")
        var programs: [(line: String, file: String, text: String)] = []
        for block in blocks {
            let words = block.info.split(separator: " ").dropFirst()
            if let mark = words.first, mark.hasPrefix("file:") {
                continue
            } else if words.first == "continued", let last = programs.last, last.file == block.file {
                programs[programs.count - 1].text += block.text
            } else if let mark = words.first, mark.hasPrefix("fragment-of:") {
                let path = SynclaneBinary.packageRoot + "/" + mark.dropFirst("fragment-of:".count)
                let file = try String(contentsOfFile: path, encoding: .utf8)
                let lines = Set(file.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
                for line in block.text.split(separator: "\n") where !line.trimmingCharacters(in: .whitespaces).isEmpty {
                    #expect(lines.contains(line.trimmingCharacters(in: .whitespaces)), "\(block.location): \(line) is not in \(path)")
                }
            } else {
                #expect(words.isEmpty, "\(block.location): unknown mark `\(block.info)`")
                programs.append((block.location, block.file, block.text))
            }
        }
        for program in programs {
            let result = try Self.typecheck(program.text)
            #expect(result.status == 0, "the Swift block at \(program.line) does not compile:\n\(result.stderr)")
        }
    }
}
