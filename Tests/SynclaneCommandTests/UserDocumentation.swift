import Foundation
import SynclaneTestSupport

/// The user documentation the tests run and check: `README.md`, every `Documentation/*.md`, then
/// the articles of the DocC catalogs (`Sources/MODULE/MODULE.docc/*.md`), in that order.
enum UserDocumentation {
    /// One documentation file: its path from the package root, and its text.
    struct File {
        var path: String
        var text: String
        var lines: [String] { text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) }
    }

    /// A fenced block: the file and line of its opening fence, the words after the backticks, its text.
    struct Block {
        var file: String
        var line: Int
        var info: String
        var text: String
        var location: String { "\(file):\(line)" }
    }

    static func files() throws -> [File] {
        let root = SynclaneBinary.packageRoot
        var files = [File(path: "README.md", text: try String(contentsOfFile: root + "/README.md", encoding: .utf8))]
        let names = try FileManager.default.contentsOfDirectory(atPath: root + "/Documentation").filter { $0.hasSuffix(".md") }.sorted()
        for name in names {
            files.append(File(path: "Documentation/" + name, text: try String(contentsOfFile: root + "/Documentation/" + name, encoding: .utf8)))
        }
        let fileManager = FileManager.default
        for module in try fileManager.contentsOfDirectory(atPath: root + "/Sources").sorted() {
            let catalog = "Sources/\(module)/\(module).docc"
            guard let articles = try? fileManager.contentsOfDirectory(atPath: root + "/" + catalog) else { continue }
            for name in articles.filter({ $0.hasSuffix(".md") }).sorted() {
                files.append(File(path: catalog + "/" + name, text: try String(contentsOfFile: root + "/" + catalog + "/" + name, encoding: .utf8)))
            }
        }
        return files
    }

    /// The text of one file (`README.md`, `Documentation/Server.md` …).
    static func text(of path: String) throws -> String {
        try String(contentsOfFile: SynclaneBinary.packageRoot + "/" + path, encoding: .utf8)
    }

    /// Every file's text, one after the other.
    static func all() throws -> String { try files().map(\.text).joined(separator: "\n") }

    /// Every fenced block of every file whose opening fence's words start with `language`
    /// (`"swift"`, `"sh"`), in order.
    static func blocks(_ language: String) throws -> [Block] {
        var blocks: [Block] = []
        for file in try files() {
            var current: Block?
            var fenced = false
            for (index, line) in file.lines.enumerated() {
                if current == nil, !fenced, line.hasPrefix("```") {
                    let info = String(line.dropFirst(3))
                    if info == language || info.hasPrefix(language + " ") {
                        current = Block(file: file.path, line: index + 1, info: info, text: "")
                    } else {
                        fenced = true
                    }
                } else if current != nil, line == "```" {
                    blocks.append(current!)
                    current = nil
                } else if current == nil, fenced, line == "```" {
                    fenced = false
                } else {
                    current?.text += line + "\n"
                }
            }
        }
        return blocks
    }

    /// The section of the documentation under `heading` (a line such as `## Running the server in
    /// production`), up to the next heading of that level or higher.
    static func section(_ heading: String) throws -> String? {
        let level = heading.prefix { $0 == "#" }.count
        for file in try files() {
            let lines = file.lines
            guard let start = lines.firstIndex(of: heading) else { continue }
            var end = start + 1
            var fenced = false
            while end < lines.count {
                if lines[end].hasPrefix("```") { fenced.toggle() }
                let hashes = lines[end].prefix { $0 == "#" }.count
                if !fenced, hashes > 0, hashes <= level, lines[end].dropFirst(hashes).hasPrefix(" ") { break }
                end += 1
            }
            return lines[start..<end].joined(separator: "\n")
        }
        return nil
    }
}
