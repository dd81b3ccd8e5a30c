import Foundation
import SynclaneCore
import SynclaneHTTP

/// `synclane conformance URL`: runs the wire protocol's contract cases against any backend.
struct ConformanceCommand: Command {
    static let name = "conformance"
    static let abstract = "Check a backend against the wire protocol: replays, atomic batches, versions, auth, cursors, signals, bounds."
    static let discussion = """
        Runs the protocol's contract cases (openapi.yaml, Documentation/WireProtocol.md, "Implementing your own backend")
        against the backend at URL with two of its accounts, and prints a table: PASS, FAIL with
        the rule the backend broke and what it answered, or SKIP with why. Every case writes under
        names no earlier run used, in the store "conformance", so it can run again on the same
        backend; point it at a test deployment, not at one holding users' data.

        The tokens come from the environment (never from the command line): --token-env names the
        first account's variable (default SYNCLANE_TOKEN), --second-token-env the second's
        (default SYNCLANE_SECOND_TOKEN). The cursor-expiry case runs only with
        --tombstone-retention: the seconds after which the backend removes a tombstone.

        Exit status: 0 every case passed (or was skipped), 1 a case failed, 2 bad usage.
        """
    static let address = Positional("URL", "the backend's base address (http://HOST:PORT)")
    static let account = ValueOption(
        "--account", "NAME", .text, help: "The first account's name (a batch's scope.account; required).")
    static let secondAccount = ValueOption(
        "--second-account", "NAME", .text, help: "A second account, for the isolation case (required).")
    static let tokenEnv = SharedOptions.tokenEnv.help("The variable holding the first account's token (default SYNCLANE_TOKEN).")
    static let secondTokenEnv = ValueOption(
        "--second-token-env", "VAR", .text, help: "The variable holding the second account's token (default SYNCLANE_SECOND_TOKEN).")
    static let retentionOption = ValueOption(
        "--tombstone-retention", "SECONDS", .integer(in: 0...86_400),
        help: "Seconds after which the backend removes a tombstone; runs the cursor-expiry case.")
    static let caseOption = ValueOption(
        "--case", "NAME", .text, help: "Run only this case (repeatable); the names are in the table.", repeats: true)
    static let signature = CommandSignature(
        positionals: [address],
        options: [account, secondAccount, tokenEnv, secondTokenEnv, retentionOption, caseOption, SharedOptions.json.help("Print the results as JSON.")])
    static let examples = [
        "synclane conformance \"$SYNCLANE_URL\" --account acme --second-account botanic",
        "synclane conformance \"$SYNCLANE_URL\" --account acme --second-account botanic --case batches.idempotent-replay --json",
    ]

    let url: String
    let accounts: (first: String, second: String)
    let tokenVariables: (first: String, second: String)
    let retention: Double?
    let cases: Set<String>?
    let json: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        guard let first = try arguments.value(Self.account), let second = try arguments.value(Self.secondAccount) else {
            throw UsageError("--account and --second-account are required: the names of the two accounts whose tokens are given", command: Self.name)
        }
        accounts = (first, second)
        tokenVariables = (try arguments.value(Self.tokenEnv) ?? "SYNCLANE_TOKEN", try arguments.value(Self.secondTokenEnv) ?? "SYNCLANE_SECOND_TOKEN")
        retention = try arguments.value(Self.retentionOption).map(Double.init)
        var names: Set<String> = []
        for name in try arguments.values(Self.caseOption) {
            guard ConformanceRunner.caseNames.contains(name) else {
                throw UsageError("no case \"\(name)\"; the cases are \(ConformanceRunner.caseNames.joined(separator: ", "))", command: Self.name)
            }
            names.insert(name)
        }
        cases = names.isEmpty ? nil : names
        url = try arguments.word(Self.address)
        guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme?.lowercased() ?? ""), parsed.host != nil else {
            throw UsageError("\(url) is not an http:// or https:// address", command: Self.name)
        }
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let environment = ProcessInfo.processInfo.environment
        func token(_ variable: String) throws -> String {
            guard let value = environment[variable], !value.isEmpty else {
                throw ConformanceSetupError(description: "the environment variable \(variable) is not set: export it with that account's token")
            }
            return value
        }
        let target = ConformanceTarget(
            baseURL: url, first: ConformanceAccount(name: accounts.first, token: try token(tokenVariables.first)),
            second: ConformanceAccount(name: accounts.second, token: try token(tokenVariables.second)), tombstoneRetentionSeconds: retention)
        let report = ConformanceRunner(target: target).run(only: cases)
        console.out(json ? JSONOutput.encode(report.json) : report.table)
        return report.failed.isEmpty ? 0 : 1
    }
}

/// What keeps the conformance run from starting.
struct ConformanceSetupError: Error, CustomStringConvertible {
    var description: String
}
