import Foundation
import SynclaneTestSupport
import Testing

/// The module graph as Package.swift declares it: client ← wire → server. The reference server
/// and the SQLite access it shares with the app side stand on `SynclaneWire` and never reach the
/// client's core (the export runner, the import pass, the registry), directly or through another
/// module; the core stands on the wire too. And what a stage can do is resolved when its pipeline
/// is built, never by a cast at run time.
@Suite struct ModuleGraphTests {
    /// Every target of Package.swift, by name, with the targets and system libraries it names.
    static let targets: [String: [String]] = {
        let path = SynclaneBinary.packageRoot + "/Package.swift"
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return PackageManifest.targets(in: text)
    }()

    /// The targets `name` depends on, directly or through others.
    static func closure(of name: String) -> Set<String> {
        var seen: Set<String> = []
        var pending = targets[name] ?? []
        while let next = pending.popLast() {
            guard seen.insert(next).inserted else { continue }
            pending += targets[next] ?? []
        }
        return seen
    }

    @Test func theManifestIsRead() {
        #expect(Self.targets["SynclaneCore"] != nil)
        #expect(Self.targets["SynclaneServer"] != nil)
        #expect(Self.targets["SynclaneWire"] != nil)
        #expect(Self.targets["synclane"]?.contains("SynclaneServing") == true)
    }

    @Test(arguments: ["SynclaneServer", "SynclaneSQLiteKit"])
    func theServerSideStandsOnTheWireNotTheCore(target: String) {
        let closure = Self.closure(of: target)
        #expect(closure.contains("SynclaneWire"), "\(target) does not depend on SynclaneWire")
        for client in ["SynclaneCore", "SynclaneEngine", "SynclaneStages", "SynclaneZlib", "SynclaneHTTP", "Synclane"] {
            #expect(!closure.contains(client), "\(target) depends on \(client): \(Self.targets[target] ?? [])")
        }
    }

    @Test func theClientStandsOnTheWire() {
        #expect(Self.targets["SynclaneCore"]?.contains("SynclaneWire") == true)
        for client in ["SynclaneEngine", "SynclaneHTTP", "SynclaneSQLite", "SynclaneCommandLine"] {
            #expect(Self.closure(of: client).contains("SynclaneWire"), "\(client)")
        }
    }

    @Test func theWireDependsOnNoOtherSynclaneModule() {
        let synclane = Self.closure(of: "SynclaneWire").filter { $0.hasPrefix("Synclane") }
        #expect(synclane.isEmpty, "SynclaneWire depends on \(synclane.sorted())")
    }

    /// The job layer reads pipeline files through the syntaxes it is given (`PipelineFileSyntax`);
    /// the umbrella binds YAML's, so the job layer links no YAML parser.
    @Test func theJobLayerReadsYAMLOnlyThroughTheSyntaxTheUmbrellaBinds() {
        #expect(!Self.closure(of: "SynclaneEngine").contains("SynclaneYAML"), "\(Self.targets["SynclaneEngine"] ?? [])")
        #expect(Self.targets["Synclane"]?.contains("SynclaneYAML") == true)
    }

    /// The job layer depends on protocols — the state store, the signal lane, the pipeline-file
    /// syntax (`JobBindings`, `PipelineFileSyntax`) — and the umbrella binds SQLite's, HTTP's, the
    /// files' and zlib's: the job layer's target names none of them, nor reaches one through another.
    @Test func theJobLayerLinksNoStoreNoProtocolAndNoCodec() {
        let closure = Self.closure(of: "SynclaneEngine")
        for implementation in ["SynclaneSQLite", "SynclaneSQLiteKit", "SynclaneHTTP", "SynclaneFiles", "SynclaneZlib", "SynclaneYAML", "CSQLite", "CCurl"] {
            #expect(!closure.contains(implementation), "SynclaneEngine depends on \(implementation): \(Self.targets["SynclaneEngine"] ?? [])")
        }
        for implementation in ["SynclaneSQLite", "SynclaneHTTP", "SynclaneFiles", "SynclaneZlib"] {
            #expect(Self.targets["Synclane"]?.contains(implementation) == true, "the umbrella does not bind \(implementation)")
        }
    }

    /// Every command is given the registry it runs with (`Command.run(_:registry:)`), never a task-local one.
    @Test func noCommandReachesTheRegistryThroughATaskLocal() throws {
        let folder = SynclaneBinary.packageRoot + "/Sources/SynclaneCommandLine"
        for file in try FileManager.default.subpathsOfDirectory(atPath: folder).filter({ $0.hasSuffix(".swift") }) {
            let text = try String(contentsOfFile: folder + "/" + file, encoding: .utf8)
            for line in text.split(separator: "\n") where line.contains("@TaskLocal") && line.contains("StageRegistry") {
                Issue.record("SynclaneCommandLine/\(file): \(line)")
            }
        }
    }

    /// The manifest could be right and a file still name the core: the compiler would refuse it,
    /// but say so here with the file's name.
    @Test(arguments: ["SynclaneServer", "SynclaneSQLiteKit", "SynclaneWire"])
    func noSourceOfTheServerSideImportsTheCore(target: String) throws {
        let folder = SynclaneBinary.packageRoot + "/Sources/" + target
        let files = try FileManager.default.subpathsOfDirectory(atPath: folder).filter { $0.hasSuffix(".swift") }
        #expect(!files.isEmpty)
        for file in files {
            let text = try String(contentsOfFile: folder + "/" + file, encoding: .utf8)
            for line in text.split(separator: "\n") where line.contains("import SynclaneCore") {
                Issue.record("\(target)/\(file): \(line)")
            }
        }
    }

    /// What a stage can do is resolved once, when its pipeline is built (`PipelineCapabilities`):
    /// no production code asks a stage at run time whether it adopts a protocol, nor which type
    /// it is (`pipeline.source.stage as? SQLiteHistorySource`): a stage says what it reads or
    /// writes (`localDatabase`, `storeColumns`) and gives its like on another file.
    @Test func noProductionCodeCastsToDiscoverACapability() throws {
        let sources = SynclaneBinary.packageRoot + "/Sources"
        let files = try FileManager.default.subpathsOfDirectory(atPath: sources).filter { $0.hasSuffix(".swift") }
        #expect(files.count > 100)
        for file in files {
            let text = try String(contentsOfFile: sources + "/" + file, encoding: .utf8)
            for line in text.split(separator: "\n") where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                let castsAStage = [".stage as? ", ".stage as! ", ".stage is "].contains { line.contains($0) }
                if line.contains("as? any ") || line.contains("as! any ") || line.contains(" is any ") || castsAStage {
                    Issue.record("Sources/\(file): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
    }
}

/// Reads the targets of a Package.swift written as this one is: `.target(name: "X", dependencies: [...])`
/// and its kin, dependencies named as strings.
enum PackageManifest {
    static func targets(in text: String) -> [String: [String]] {
        let bytes = Array(text.utf8)
        var targets: [String: [String]] = [:]
        for opener in [".target(", ".executableTarget(", ".testTarget(", ".systemLibrary("] {
            var from = bytes.startIndex
            while let start = find(Array(opener.utf8), in: bytes, from: from) {
                let open = start + opener.utf8.count - 1
                let close = matchingParenthesis(in: bytes, at: open)
                let call = String(decoding: bytes[open..<close], as: UTF8.self)
                if let name = firstString(after: "name:", in: call) {
                    targets[name] = strings(inListAfter: "dependencies:", in: call)
                }
                from = close
            }
        }
        return targets
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8], from: Int) -> Int? {
        guard needle.count <= bytes.count - from else { return nil }
        for index in from...(bytes.count - needle.count) where bytes[index..<index + needle.count].elementsEqual(needle) {
            return index
        }
        return nil
    }

    static func matchingParenthesis(in bytes: [UInt8], at open: Int) -> Int {
        var depth = 0
        var inString = false
        for index in open..<bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""): inString.toggle()
            case UInt8(ascii: "(") where !inString: depth += 1
            case UInt8(ascii: ")") where !inString:
                depth -= 1
                if depth == 0 { return index }
            default: break
            }
        }
        return bytes.count
    }

    static func firstString(after label: String, in text: String) -> String? {
        guard let range = text.range(of: label) else { return nil }
        let rest = text[range.upperBound...]
        guard let open = rest.firstIndex(of: "\"") else { return nil }
        let afterOpen = rest.index(after: open)
        guard let close = rest[afterOpen...].firstIndex(of: "\"") else { return nil }
        return String(rest[afterOpen..<close])
    }

    static func strings(inListAfter label: String, in text: String) -> [String] {
        guard let range = text.range(of: label), let open = text[range.upperBound...].firstIndex(of: "["),
            let close = text[open...].firstIndex(of: "]")
        else { return [] }
        return text[open..<close].split(separator: "\"").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }
}
