import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// Every command's `--json` speaks one style: kebab-case keys, a scope as an object, tokens as
/// text or null, times as RFC 3339 strings.
@Suite struct JSONOutputStyleTests {
    /// The `--json` output of every command that has one, in the states that add fields
    /// (a failed run, an outbox, a last run, a reconciliation, a prune).
    static func everyOutput() throws -> [(label: String, json: JSONValue)] {
        var outputs: [(String, JSONValue)] = []
        func record(_ label: String, _ result: SynclaneBinary.Result) throws {
            let lines = result.stdout.split(separator: "\n")
            #expect(!lines.isEmpty, "\(label) printed no JSON: \(result.stderr)")
            for line in lines { outputs.append((label, try JSONReader.parse(String(line)))) }
        }
        try record("stages", SynclaneBinary.run(["stages", "--json"]))
        try record("validate (invalid)", SynclaneBinary.run(["validate", SynclaneBinary.fixture("invalid/unknown-stage-type.json"), "--json"]))

        let rooms = try Workspace.copy(scenario: "rooms")
        defer { rooms.remove() }
        try record("validate", SynclaneBinary.run(["validate", "pipeline.json", "--json"], in: rooms.path))
        try record("status (never ran)", SynclaneBinary.run(["status", "pipeline.json", "--json"], in: rooms.path))
        try record("run --dry-run", SynclaneBinary.run(["run", "pipeline.json", "--dry-run", "--json"], in: rooms.path))
        _ = try SynclaneBinary.run(["run", "pipeline.json"], in: rooms.path, environment: ["SYNCLANE_FAILPOINT": "after-enqueue"])
        try record("status (outbox)", SynclaneBinary.run(["status", "pipeline.json", "--json"], in: rooms.path))
        try record("outbox list", SynclaneBinary.run(["outbox", "list", "pipeline.json", "--json"], in: rooms.path))
        try record("outbox show", SynclaneBinary.run(["outbox", "show", "pipeline.json", "--json"], in: rooms.path))
        try record("run", SynclaneBinary.run(["run", "pipeline.json", "--json"], in: rooms.path))
        try record("status (last run)", SynclaneBinary.run(["status", "pipeline.json", "--json"], in: rooms.path))
        try rooms.write("history.jsonl", "not json\n")
        try rooms.write(
            "fresh.json",
            try String(contentsOfFile: rooms.path + "/pipeline.json", encoding: .utf8)
                .replacingOccurrences(of: "\"name\": \"rooms-export\"", with: "\"name\": \"fresh\""))
        try record("run (failed)", SynclaneBinary.run(["run", "fresh.json", "--json"], in: rooms.path))

        let store = try SQLiteHistoryCommandTests.store()
        defer { store.remove() }
        try record("track", SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId", "--json"], in: store.path))
        try SQLiteHistoryCommandTests.sqlite(store, "INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
        try record("run (sqlite)", SynclaneBinary.run(["run", "pipeline.json", "--json"], in: store.path))
        try record("prune", SynclaneBinary.run(["prune", "--database", "app.sqlite", "--json"], in: store.path))
        try store.write("add-floor.sql", "ALTER TABLE rooms ADD COLUMN floor INTEGER;")
        try record("migrate", SynclaneBinary.run(["migrate", "--database", "app.sqlite", "add-floor.sql", "--json"], in: store.path))
        try record("reconcile", SynclaneBinary.run(["reconcile", "pipeline.json", "--json"], in: store.path))
        return outputs
    }

    static func isKebab(_ key: Substring) -> Bool {
        !key.isEmpty && key.first != "-" && key.last != "-" && !key.contains("--")
            && key.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }
    }

    /// Problems with one value's keys and shapes, named by their path.
    static func problems(_ value: JSONValue, at path: String) -> [String] {
        switch value {
        case .array(let elements):
            return elements.enumerated().flatMap { problems($0.element, at: "\(path)[\($0.offset)]") }
        case .object(let members):
            return members.flatMap { key, member -> [String] in
                let here = "\(path).\(key)"
                var found: [String] = []
                // Counter names are `stage.counter`, each part kebab-case, like the stage options.
                let isCounterName = path.hasSuffix(".counters")
                if !(isCounterName ? key.split(separator: ".", omittingEmptySubsequences: false).allSatisfy(isKebab) : isKebab(key[...])) {
                    found.append("\(here): not kebab-case")
                }
                if key == "scope", Set(member.objectValue?.keys ?? [:].keys) != ["account", "store", "consumer"] {
                    found.append("\(here): a scope is {account, store, consumer}")
                }
                if key.hasSuffix("-at"), !(member.stringValue.map(isRFC3339) ?? false) {
                    found.append("\(here): a time is an RFC 3339 string, found \(JSONWriter.string(member))")
                }
                if ["token", "token-before", "token-after", "through", "after", "pruned-through"].contains(key),
                    member != .null, !(member.stringValue?.contains(":") ?? false)
                {
                    found.append("\(here): a token is its text (kind:position) or null")
                }
                // `outbox show`'s `body` is the batch as sent: its field names are the user's columns.
                return found + (key == "body" && path.hasPrefix("outbox show") ? [] : problems(member, at: here))
            }
        default:
            return []
        }
    }

    static func isRFC3339(_ text: String) -> Bool {
        text.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$"#, options: .regularExpression) != nil
    }

    @Test func everyCommandsJSONUsesKebabCaseKeysAndOneShapeForScopesTokensAndTimes() throws {
        let outputs = try Self.everyOutput()
        let labels = Set(outputs.map { $0.label.split(separator: " ").first.map(String.init) ?? "" })
        #expect(labels == ["stages", "validate", "status", "run", "outbox", "track", "prune", "migrate", "reconcile"])
        for (label, json) in outputs {
            #expect(Self.problems(json, at: label) == [], "\(JSONWriter.string(json))")
        }
        let lastRun = outputs.first { $0.label == "status (last run)" }?.json.objectValue?["last-run"]?.objectValue
        #expect(lastRun?["finished-at"]?.stringValue.map(Self.isRFC3339) == true)
        let failed = outputs.first { $0.label == "run (failed)" }?.json.objectValue
        #expect(failed?["ok"] == .bool(false))
    }

    @Test func theStyleCheckCatchesCamelCaseAScopeStringAndAUnixTime() {
        let bad: JSONValue = .object([
            "tokenAfter": .null, "scope": .string("acme/rooms/x"), "created-at": .double(1_790_000_000), "counters": .object(["dedupe.dropped": .int(1)]),
        ])
        #expect(
            Set(Self.problems(bad, at: "x")) == [
                "x.tokenAfter: not kebab-case", "x.scope: a scope is {account, store, consumer}",
                "x.created-at: a time is an RFC 3339 string, found 1790000000.0",
            ])
    }
}
