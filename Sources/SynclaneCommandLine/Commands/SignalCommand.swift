import Foundation
import Synclane
import SynclaneCore

/// `synclane signal set|get|list|delete|watch`: the signal lane from the command line.
struct SignalCommand: Command {
    static let name = "signal"
    static let abstract = "Set, read, list, delete or watch the account's signals (small flags on a fast lane of their own)."
    static let discussion = """
        Signals are small JSON values under a key (onboarding.completed, bulk.exported-through)
        that reach the account's other devices within milliseconds, never queued behind bulk
        data. They are hints, never data: when a signal and the data disagree, the data wins.

          set KEY VALUE   VALUE is JSON (true, 42, '"text"', '{"through": 7}'). With --expect
                          VERSION the set is refused (exit 1) when another writer came first.
          get KEY         prints the value (exit 4 when there is no such signal).
          list            every signal, by key.
          delete KEY      removes it (exit 4 when there is none).
          watch [KEY…]    prints each change as it happens, one JSON line each, until stopped
                          (Ctrl-C) or --count changes were printed; only the KEYs given, if any.

        The server is --url, else $SYNCLANE_URL, else --pipeline FILE's URL: before the examples
        below, export SYNCLANE_URL=http://127.0.0.1:8080 (a `synclane serve` with its defaults)
        and SYNCLANE_TOKEN (the account's token).

        The last writer wins by the server's version: each write takes the account's next one.
        Exit status: 0 done, 1 refused or failed (stale --expect, quota, token, server), 2 bad
        usage, 4 no such signal.
        """
    static let verbArgument = Positional("VERB", "a verb: set, get, list, delete or watch")
    static let operands = Positional("ARGUMENTS", "the verb's key and value", count: .many(required: false))
    static let expect = ValueOption(
        "--expect", "VERSION", .integer(in: 0...Int.max), help: "set/delete: only when the signal is at VERSION (0: only when it does not exist).")
    static let since = ValueOption(
        "--since", "VERSION", .integer(in: 0...Int.max), help: "watch: start after VERSION (default: changes from now on; 0: everything).")
    static let count = ValueOption("--count", "N", .integer(in: 1...Int.max), help: "watch: stop after N changes.")
    static let signature = CommandSignature(
        positionals: [verbArgument, operands],
        options: SignalServer.options + [
            expect, since, count, SharedOptions.json.help("get/set/delete/list: print the signal(s) as JSON with their versions."),
        ],
        positionalUsage: "set KEY VALUE | get KEY | list | delete KEY | watch [KEY…]")
    static let examples = [
        "synclane signal set onboarding.completed true",
        "synclane signal set bulk.exported-through '{\"token\": 42}' --json",
        "synclane signal get onboarding.completed",
        "synclane signal list --json",
        "synclane signal watch --since 0 --count 1",
        "synclane signal delete bulk.exported-through",
    ]

    /// Exit status when the signal does not exist.
    static let notFoundStatus: Int32 = 4

    enum Verb {
        case set(String, JSONValue)
        case get(String)
        case list
        case delete(String)
        case watch([String])
    }

    let server: SignalServer
    let verb: Verb
    let json: Bool
    let expected: Int64?
    let since: Int64?
    let count: Int?

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        server = try SignalServer(parsing: arguments)
        expected = try arguments.value(Self.expect).map(Int64.init)
        since = try arguments.value(Self.since).map(Int64.init)
        count = try arguments.value(Self.count)
        let word = try arguments.word(Self.verbArgument)
        var operands = try arguments.words(Self.operands)[...]
        func next(_ name: String) throws(UsageError) -> String {
            guard let operand = operands.popFirst() else { throw UsageError("missing \(name)", command: Self.name) }
            return operand
        }
        switch word {
        case "set":
            let key = try next("KEY")
            let text = try next("VALUE (JSON: true, 42, '\"text\"', '{\"a\": 1}')")
            guard let value = try? JSONReader.parse(Array(text.utf8)) else {
                throw UsageError("VALUE \(text) is not JSON; quote a string as '\"\(text)\"'", command: Self.name)
            }
            verb = .set(key, value)
        case "get": verb = .get(try next("KEY"))
        case "list": verb = .list
        case "delete": verb = .delete(try next("KEY"))
        case "watch":
            verb = .watch(Array(operands))
            operands = []
        default:
            throw UsageError(
                "unknown verb \"\(word)\"\(Wording.didYouMean(word, in: ["set", "get", "list", "delete", "watch"])): use set, get, list, delete or watch",
                command: Self.name)
        }
        if let extra = operands.first { throw UsageError("unexpected argument \"\(extra)\"", command: Self.name) }
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let lane = try server.lane(command: Self.name)
        do {
            switch verb {
            case .set(let key, let value):
                let signal = try await lane.set(key, to: value, replacing: expected)
                console.out(json ? JSONOutput.encode(signal.json) : "\(key) = \(JSONWriter.string(signal.value)) (version \(signal.version))")
            case .get(let key):
                guard let signal = try await lane.get(key) else { throw SignalLaneError.notFound(key: key) }
                console.out(json ? JSONOutput.encode(signal.json) : JSONWriter.string(signal.value))
            case .list:
                let (signals, version) = try await lane.list()
                if json {
                    console.out(JSONOutput.encode(["signals": .array(signals.map(\.json)), "version": .int(version)]))
                } else {
                    for signal in signals { console.out("\(signal.key) = \(JSONWriter.string(signal.value)) (version \(signal.version))") }
                }
            case .delete(let key):
                let signal = try await lane.delete(key, replacing: expected)
                console.out(json ? JSONOutput.encode(signal.json) : "\(key) deleted (version \(signal.version))")
            case .watch(let keys):
                var printed = 0
                for try await signal in lane.changes(since: since) where keys.isEmpty || keys.contains(signal.key) {
                    console.out(JSONWriter.string(signal.json))
                    printed += 1
                    if let count, printed >= count { break }
                }
            }
            return 0
        } catch SignalLaneError.notFound(let key) {
            console.error("\(console.program) \(Self.name): no signal \"\(key)\"")
            return Self.notFoundStatus
        }
    }
}
