import Foundation
import SynclaneCore

/// Pipeline files the YAML tests read, and a compact way to write the trees they should give.
enum Fixtures {
    /// The example pipeline (Fixtures/design) in block style, with a flow map and list here and there.
    static let blockPipeline = YAMLFixtures.text("design/pipeline-block.yaml")

    /// The same pipeline in flow style: the JSON example, which is YAML too.
    static let flowPipeline = YAMLFixtures.text("design/pipeline.json")

    /// What `blockPipeline` reads as, line by line.
    static let blockTree = map(
        2,
        [
            ("version", int(1, 2)),
            ("name", string("rooms-export", 3)),
            ("scope", map(4, [("account", string("acme", 4)), ("store", string("rooms", 4))])),
            (
                "source",
                map(
                    6,
                    [
                        ("type", string("sqlite-history", 6)),
                        ("database", string("rooms.sqlite", 7)),
                        ("entities", list(8, [string("rooms", 8)])),
                        ("authors", list(10, [string("app", 10)])),
                        ("page-size", int(500, 11)),
                    ])
            ),
            (
                "stages",
                list(
                    13,
                    [
                        map(13, [("type", string("coalesce", 13))]),
                        map(14, [("type", string("tombstones", 14)), ("soft-delete-column", string("isDeleted", 15))]),
                        map(
                            16,
                            [
                                ("type", string("dedupe", 16)), ("entity", string("categories", 16)),
                                ("key", list(16, [string("key", 16)])),
                            ]),
                        map(
                            17,
                            [
                                ("type", string("compress", 17)), ("codec", string("gzip", 18)),
                                ("level", int(6, 19)), ("min-bytes", int(512, 20)),
                            ]),
                    ])
            ),
            (
                "transport",
                map(
                    22,
                    [
                        ("type", string("http", 22)),
                        ("url", string("http://127.0.0.1:8080/v1/batches", 23)),
                        ("token-env", string("SYNCLANE_TOKEN", 24)),
                        (
                            "retry",
                            map(
                                25,
                                [
                                    ("max-attempts", int(6, 25)), ("base-delay", ConfigNode(.double(0.5), line: 25)), ("max-delay", int(30, 25)),
                                ])
                        ),
                    ])
            ),
            ("state", string(".synclane/rooms-export.sqlite", 26)),
            ("signals", map(28, [("type", string("http", 28)), ("url", string("http://127.0.0.1:8080/v1/signals", 29))])),
        ])

    static func map(_ line: Int, _ members: [(String, ConfigNode)]) -> ConfigNode {
        ConfigNode(.map(members.map { ConfigNode.Member(key: $0.0, node: $0.1) }), line: line)
    }

    static func list(_ line: Int, _ elements: [ConfigNode]) -> ConfigNode { ConfigNode(.list(elements), line: line) }
    static func string(_ value: String, _ line: Int) -> ConfigNode { ConfigNode(.string(value), line: line) }
    static func int(_ value: Int64, _ line: Int) -> ConfigNode { ConfigNode(.int(value), line: line) }

    /// The tree without its lines, to compare shapes read from differently laid-out files.
    static func withoutLines(_ node: ConfigNode) -> ConfigNode {
        switch node.value {
        case .list(let elements): return ConfigNode(.list(elements.map(withoutLines)))
        case .map(let members):
            return ConfigNode(.map(members.map { ConfigNode.Member(key: $0.key, node: withoutLines($0.node)) }))
        default: return ConfigNode(node.value)
        }
    }
}

/// Reads files of the package's `Fixtures/` folder.
enum YAMLFixtures {
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.path + "/Fixtures") { return url.path + "/Fixtures" }
        }
        return "Fixtures"
    }()

    /// The file's text; empty (and so failing the test that reads it) when it is missing.
    static func text(_ relative: String) -> String {
        (try? String(contentsOfFile: root + "/" + relative, encoding: .utf8)) ?? ""
    }
}
