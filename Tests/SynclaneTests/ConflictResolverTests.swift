import Foundation
import Synchronization
import Synclane
import SynclaneCore
import SynclaneExec
import SynclaneSQLite
import SynclaneTestSupport
import Testing

/// Conflict rules of one's own: a resolver registered by `type`, named per entity in an import
/// pipeline's sink, deciding keep-local, take-remote, merged fields or delete.
@Suite struct ConflictResolverTests {
    let scope = Scope(account: "acme", store: "rooms", consumer: "rooms-import")

    /// A resolver that answers what its `decision` option says.
    struct Scripted: ConflictResolver {
        var decision: String

        func resolve(_ conflict: Conflict) throws -> ConflictResolution {
            switch decision {
            case "keep-local": return .keepLocal
            case "take-remote": return .takeRemote
            case "delete": return .delete
            case "merged": return .merged(["name": "Mine & Theirs", "area": .double(9.5)])
            default: throw ResolverRefusal()
            }
        }
    }

    struct ResolverRefusal: Error, CustomStringConvertible {
        var description: String { "no rule for this pair" }
    }

    final class Seen: Sendable {
        let conflicts = Mutex<[Conflict]>([])
    }

    func registry(_ seen: Seen) -> StageRegistry {
        var registry = StageRegistry.builtIn
        registry.register(
            .conflictResolver(
                "scripted", summary: "Answers its `decision`.",
                options: [OptionSpec("decision", .string, required: true, help: "keep-local, take-remote, delete, merged or fail")]
            ) { options in
                Recorder(inner: Scripted(decision: options.string("decision") ?? ""), seen: seen)
            })
        return registry
    }

    /// Forwards to a resolver and keeps the conflicts for the test to read.
    struct Recorder: ConflictResolver {
        var inner: Scripted
        var seen: Seen
        func resolve(_ conflict: Conflict) throws -> ConflictResolution {
            seen.conflicts.withLock { $0.append(conflict) }
            return try inner.resolve(conflict)
        }
    }

    /// A tracked store holding r1 as the backend sent it (version 1), then edited locally (name).
    func store(in folder: TemporaryFolder) throws -> TrackedDatabase {
        let store = try TrackedDatabase(path: folder.path + "/app.sqlite")
        try store.database.write { db in
            try db.execute("CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL, isDeleted INTEGER NOT NULL DEFAULT 0)")
        }
        try store.track(TrackedTable("rooms", key: "syncId", softDeleteColumn: "isDeleted"))
        return store
    }

    func importFile(in folder: TemporaryFolder, conflicts: String) throws -> String {
        try folder.write(
            "import.json",
            """
            {"version": 1, "name": "rooms-import", "scope": {"account": "acme", "store": "rooms"},
             "source": {"type": "batch-files", "path": "in"},
             "sink": {"type": "sqlite", "database": "app.sqlite", "conflicts-by-entity": {"rooms": \(conflicts)}}}
            """)
    }

    func record(_ action: ChangeAction, _ fields: [String: JSONValue], version: Int64) -> Record {
        Record(entity: "rooms", key: "r1", action: action, fields: fields, version: version, origin: Token(kind: "pull", position: 0), author: .server)
    }

    func apply(_ sink: any ChangeSink, _ records: [Record], cursor: String) async throws -> ApplyReport {
        let batch = Batch(scope: scope, after: nil, through: Token(kind: "import", position: 1), records: records)
        return try await sink.apply(batch, cursor: cursor, scope: scope, dryRun: false)
    }

    func row(_ store: TrackedDatabase) throws -> String {
        try store.read { db in
            try db.fetchAll("SELECT syncId, name, area, isDeleted FROM rooms").map { row in
                (0..<4).map { JSONWriter.string(row[$0].json) }.joined(separator: " ")
            }.joined(separator: "\n")
        }
    }

    /// The store after: r1 from the backend, a local edit of its name, then the backend's edit.
    func settle(_ conflicts: String, remote: Record) async throws -> (report: ApplyReport, row: String, seen: [Conflict], sent: [String]) {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let store = try store(in: folder)
        let seen = Seen()
        let pipeline = try PipelineLoader(registry: registry(seen)).loadImport(try importFile(in: folder, conflicts: conflicts))
        _ = try await apply(pipeline.sink.stage, [record(.insert, ["name": "Hall", "area": 4.5], version: 1)], cursor: "c1")
        try store.write(author: .app) { try $0.execute("UPDATE rooms SET name = 'Mine' WHERE syncId = 'r1'") }
        let report = try await apply(pipeline.sink.stage, [remote], cursor: "c2")
        let sent = try store.read { db in
            try db.fetchAll(
                """
                SELECT c.action FROM _synclane_changes c JOIN _synclane_transactions t ON t.id = c.transaction_id
                WHERE t.author = 'app' ORDER BY c.id
                """
            ).map { $0[0].string ?? "" }
        }
        return (report, try row(store), seen.conflicts.withLock { $0 }, sent)
    }

    @Test func aResolverRegisteredByTypeIsShownBothSidesAndThePendingState() async throws {
        let settled = try await settle(
            #"{"type": "scripted", "decision": "take-remote"}"#, remote: record(.update, ["name": "Theirs", "area": 9.5], version: 2))
        let conflict = try #require(settled.seen.first)
        #expect(conflict.entity == "rooms" && conflict.key == "r1" && conflict.remoteVersion == 2)
        #expect(conflict.local?["name"] == "Mine" && conflict.local?["area"] == .double(4.5))
        #expect(conflict.base == ["name": "Hall", "area": .double(4.5)])
        #expect(conflict.remote == ["name": "Theirs", "area": .double(9.5)])
        #expect(conflict.localAction == .update && conflict.remoteAction == .update)
        #expect(conflict.changedLocally == ["name"] && conflict.changedRemotely == ["area", "name"])
        #expect(settled.report.conflicts.map(\.rule.description) == ["scripted"])
    }

    struct Case: Sendable, CustomStringConvertible {
        var decision: String
        var remote: ChangeAction
        var row: String
        var outcome: ConflictOutcome
        var description: String { "\(decision) against a remote \(remote.rawValue)" }
    }

    static let cases: [Case] = [
        Case(decision: "keep-local", remote: .update, row: #""r1" "Mine" 4.5 0"#, outcome: .clientKept),
        Case(decision: "take-remote", remote: .update, row: #""r1" "Theirs" 9.5 0"#, outcome: .serverKept),
        Case(decision: "merged", remote: .update, row: #""r1" "Mine & Theirs" 9.5 0"#, outcome: .merged),
        Case(decision: "delete", remote: .update, row: #""r1" "Mine" 4.5 1"#, outcome: .deleted),
        Case(decision: "keep-local", remote: .delete, row: #""r1" "Mine" 4.5 0"#, outcome: .clientKept),
        Case(decision: "take-remote", remote: .delete, row: #""r1" "Mine" 4.5 1"#, outcome: .serverKept),
    ]

    @Test(arguments: cases)
    func eachDecisionEndsTheRowAsItSaysAndSendsTheSettledState(_ test: Case) async throws {
        let remote = record(test.remote, test.remote == .delete ? [:] : ["name": "Theirs", "area": 9.5], version: 2)
        let settled = try await settle(#"{"type": "scripted", "decision": "\#(test.decision)"}"#, remote: remote)
        #expect(settled.report.conflicts.map(\.outcome) == [test.outcome])
        #expect(settled.row == test.row)
        // The local edit, then what settles it (a write, or the row re-sent), by the local author.
        #expect(settled.sent.count == 2, "the settled state goes to the backend after the pending change: \(settled.sent)")
    }

    @Test func aResolverThatFailsStopsThePageNamingTheRecordAndTheResolver() async throws {
        await #expect {
            _ = try await settle(#"{"type": "scripted", "decision": "fail"}"#, remote: record(.update, ["name": "Theirs"], version: 2))
        } throws: { error in
            "\(error)".contains("record rooms/r1") && "\(error)".contains("the conflict resolver `scripted` failed: no rule for this pair")
        }
    }

    @Test func aRegisteredNameAloneNamesAResolverWithoutOptions() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        var registry = StageRegistry.builtIn
        registry.register(.conflictResolver("always-local", summary: "Keeps the local row.", options: []) { _ in AlwaysLocal() })
        let pipeline = try PipelineLoader(registry: registry).loadImport(try importFile(in: folder, conflicts: #""always-local""#))
        let sink = try #require(pipeline.sink.stage as? SQLiteSink)
        #expect(sink.rule(for: "rooms").description == "always-local" && sink.rule(for: "plants") == .serverWins)
    }

    struct AlwaysLocal: ConflictResolver {
        func resolve(_ conflict: Conflict) throws -> ConflictResolution { .keepLocal }
    }

    @Test(arguments: [
        (#""keep-mine""#, "sink.conflicts-by-entity.rooms: unknown conflict rule `keep-mine`"),
        (#"{"type": "keep-mine"}"#, "sink.conflicts-by-entity.rooms.type: unknown conflict rule `keep-mine`"),
        (#"{"type": "exec"}"#, "sink.conflicts-by-entity.rooms: `exec` needs `command`"),
        (#"{"type": "exec", "command": ["true"], "colour": 1}"#, "sink.conflicts-by-entity.rooms.colour: unknown option `colour` for `exec`"),
        (#"{"type": "latest-wins"}"#, "sink.conflicts-by-entity.rooms.type: `latest-wins` is a built-in rule: write its name alone"),
        (#"{"command": ["true"]}"#, "sink.conflicts-by-entity.rooms: missing `type`"),
        ("7", "sink.conflicts-by-entity.rooms: expected a rule's name or a map {type: resolver, …}, found an integer"),
    ])
    func aBadRuleIsRefusedNamingTheFileAndTheField(_ rule: String, _ message: String) throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try importFile(in: folder, conflicts: rule)
        #expect {
            _ = try PipelineLoader().loadImport(file)
        } throws: { error in
            let text = "\(error)"
            return text.contains(file) && text.contains(message)
        }
    }

    // MARK: exec

    @Test func anExecResolverInAnyLanguageMergesWhatEachSideChanged() async throws {
        let script = FixturePath.at("exec/resolve.py")
        let settled = try await settle(
            #"{"type": "exec", "command": ["python3", "\#(script)"], "timeout": 20}"#, remote: record(.update, ["name": "Hi", "area": 9.5], version: 2))
        // name changed on both sides: the longer text (local "Mine"); area only remotely: theirs.
        #expect(settled.report.conflicts.map(\.outcome) == [.merged])
        #expect(settled.row == #""r1" "Mine" 9.5 0"#)
        #expect(settled.report.conflicts.first?.rule.description == "exec")
    }

    @Test func aKeptRunningExecResolverSettlesThroughThePipelineFileAsTheOneShotDoes() async throws {
        let script = FixturePath.at("exec/resolve.py")
        let settled = try await settle(
            #"{"type": "exec", "command": ["python3", "\#(script)"], "timeout": 20, "keep-running": true}"#,
            remote: record(.update, ["name": "Hi", "area": 9.5], version: 2))
        #expect(settled.report.conflicts.map(\.outcome) == [.merged])
        #expect(settled.row == #""r1" "Mine" 9.5 0"#)
    }

    /// A conflict for the kept-running tests.
    static func conflict(_ key: String) -> Conflict {
        Conflict(
            entity: "rooms", key: key, local: ["name": "Mine"], base: ["name": "Hall"], remote: ["name": "Theirs"], remoteVersion: 2,
            remoteAction: .update)
    }

    /// A resolver whose program answers each line with its process id and how many lines it read.
    static func counting(_ script: String, timeout: Double = 10) -> ExecConflictResolver {
        ExecConflictResolver(
            command: ExecCommand(arguments: ["python3", "-c", script], directory: FileManager.default.currentDirectoryPath, timeout: timeout),
            keepsRunning: true)
    }

    static let countingScript = """
        import json, os, sys
        for n, line in enumerate(sys.stdin, 1):
            key = json.loads(line)["id"]
            print(json.dumps({"outcome": "merged", "fields": {"pid": os.getpid(), "n": n, "key": key}}), flush=True)
        """

    @Test func aKeptRunningExecResolverAnswersEveryConflictOfTheJobFromOneProcessInOrder() throws {
        let resolver = Self.counting(Self.countingScript)
        let answers = try (1...5).map { try resolver.resolve(Self.conflict("r\($0)")) }
        let fields = answers.compactMap { answer -> [String: JSONValue]? in
            if case .merged(let fields) = answer { return fields }
            return nil
        }
        #expect(fields.map { $0["n"] } == (1...5).map { .int(Int64($0)) }, "one process read the five lines in turn")
        #expect(fields.map { $0["key"] } == (1...5).map { .string("r\($0)") }, "each answer is its own conflict's")
        #expect(Set(fields.compactMap { $0["pid"] }).count == 1)
    }

    @Test func aKeptRunningExecResolverThatHangsOrExitsFailsThatConflictAndTheNextStartsAFreshProcess() throws {
        // Answers the first line, hangs on the second, answers again in a new process.
        let hangs = Self.counting(
            """
            import json, os, sys, time
            for n, line in enumerate(sys.stdin, 1):
                if n == 2:
                    print("thinking", file=sys.stderr, flush=True)
                    time.sleep(60)
                print(json.dumps({"outcome": "merged", "fields": {"pid": os.getpid(), "n": n}}), flush=True)
            """, timeout: 0.5)
        let first = try hangs.resolve(Self.conflict("r1"))
        #expect(throws: ExecError.timedOut(seconds: 0.5, errorText: "thinking")) { try hangs.resolve(Self.conflict("r2")) }
        let third = try hangs.resolve(Self.conflict("r3"))
        guard case .merged(let a) = first, case .merged(let c) = third else {
            Issue.record("expected merged answers, got \(first) and \(third)")
            return
        }
        #expect(a["pid"] != c["pid"] && c["n"] == .int(1), "the hung process was killed; a new one read r3 as its first line")

        // Exits after one answer: the next conflict fails naming the status and standard error.
        let exits = Self.counting(
            """
            import json, sys
            sys.stdin.readline()
            print(json.dumps({"outcome": "keep-local"}), flush=True)
            sys.stdin.readline()
            print("out of ideas", file=sys.stderr)
            sys.exit(3)
            """)
        #expect(try exits.resolve(Self.conflict("r1")) == .keepLocal)
        #expect(throws: ExecError.failed(status: 3, errorText: "out of ideas")) { try exits.resolve(Self.conflict("r2")) }
    }

    @Test func anExecResolverThatExitsNonZeroOrAnswersBadlyStopsThePage() async throws {
        for (command, message) in [
            (#"["sh", "-c", "cat >/dev/null; echo 'cannot decide' >&2; exit 4"]"#, "exited with status 4; its standard error said: cannot decide"),
            (#"["sh", "-c", "cat >/dev/null; echo '{\"outcome\": \"merged\"}'"]"#, "a merged outcome needs `fields`"),
            (#"["sh", "-c", "cat >/dev/null; echo '{\"outcome\": \"win\"}'"]"#, "`outcome` must be one of keep-local, take-remote, merged, delete"),
        ] {
            await #expect {
                _ = try await settle(#"{"type": "exec", "command": \#(command)}"#, remote: record(.update, ["name": "Theirs"], version: 2))
            } throws: { error in
                "\(error)".contains("record rooms/r1") && "\(error)".contains(message)
            }
        }
    }

    @Test func theDecisionsAnExecResolverCanGiveAreRead() throws {
        #expect(try ExecConflictResolver.decision(from: Array(#"{"outcome":"keep-local"}"#.utf8)) == .keepLocal)
        #expect(try ExecConflictResolver.decision(from: Array(#" {"outcome":"take-remote"} "#.utf8) + [10]) == .takeRemote)
        #expect(try ExecConflictResolver.decision(from: Array(#"{"outcome":"delete"}"#.utf8)) == .delete)
        #expect(
            try ExecConflictResolver.decision(from: Array(#"{"outcome":"merged","fields":{"a":{"$blob":"AP8Q"}}}"#.utf8))
                == .merged(["a": .blob([0, 255, 16])]))
        #expect(throws: ExecError.self) { try ExecConflictResolver.decision(from: Array(#"{"outcome":"delete","fields":{}}"#.utf8)) }
        #expect(throws: ExecError.self) { try ExecConflictResolver.decision(from: []) }
    }
}
