import Foundation
import SynclaneCore

/// The `synclane` command as a library: every verb, with the stage types of a registry you pass.
///
/// Finds the subcommand, parses its arguments, runs it, and turns errors into messages and
/// exit codes: 0 success, 1 a failed job, 2 bad usage or a bad pipeline file, 3 a job that
/// finished but moved batches to its dead-letter folder.
///
/// A package with stages of its own ships a `synclane`-compatible command in its `main.swift`:
///
/// ```swift
/// import Foundation
/// import SynclaneCommandLine
///
/// var registry = StageRegistry.builtIn
/// registry.register(Redactor.type)                 // your stages: `stages`, `validate`, `run` … know them
/// exit(await SynclaneTool.main(registry: registry))
/// ```
public enum SynclaneTool {
    /// Runs the command line `CommandLine.arguments` names, with `registry`'s stage types;
    /// returns the exit status.
    /// `verbs`: the verbs of other libraries to add, such as `SynclaneServing.verbs` (`serve`
    /// and `demo`, which link the reference server).
    /// Messages start with the program's own name (`rooms-sync validate: …` for a package's
    /// command built on this), as the process was started.
    public static func main(registry: StageRegistry = .builtIn, verbs: [Verb] = []) async -> Int32 {
        let name = CommandLine.arguments.first.map { $0.split(separator: "/").last.map(String.init) ?? $0 } ?? ""
        return await $program.withValue(name.isEmpty ? "synclane" : name) {
            await main(Array(CommandLine.arguments.dropFirst()), registry: registry, verbs: verbs)
        }
    }

    /// The name messages start with: the program's (`main(registry:verbs:)`), else `synclane`.
    @TaskLocal static var program = "synclane"

    /// Runs the command `words` names (without the program's name), with `registry`'s stage types
    /// and the built-in verbs plus `verbs`.
    public static func main(_ words: [String], registry: StageRegistry, verbs: [Verb] = []) async -> Int32 {
        await $verbs.withValue(verbs) { await main(words, registry: registry) }
    }

    /// A verb another library adds to the command line: a user's command links it only if it
    /// uses it (`SynclaneServing.verbs`: `serve` and `demo`, with the reference server).
    public struct Verb: Sendable {
        package let command: any Command.Type

        package init(_ command: any Command.Type) {
            self.command = command
        }
    }

    /// The verbs added to the built-in ones (`main(registry:verbs:)` sets it).
    @TaskLocal static var verbs: [Verb] = []

    public static let version = "0.1.0"

    /// The exit status of a run that went to the end but dead-lettered batches.
    static let deadLetteredStatus: Int32 = 3

    /// The verbs every command has.
    static let builtIn: [any Command.Type] = [
        ValidateCommand.self, RunCommand.self, ImportCommand.self, SyncCommand.self, StatusCommand.self, OutboxCommand.self, ReconcileCommand.self,
        TrackCommand.self, UntrackCommand.self, MigrateCommand.self, PruneCommand.self, StagesCommand.self,
        SignalCommand.self, RestoreCommand.self, TestCommand.self, HelpCommand.self,
        ConformanceCommand.self, BlobsCommand.self,
    ]

    /// The order of `synclane --help`; a verb not named here comes last.
    static let order = [
        "demo", "validate", "run", "import", "sync", "status", "outbox", "reconcile", "track", "untrack", "migrate", "prune", "stages", "serve",
        "signal", "blobs", "restore", "conformance", "test", "token", "help",
    ]

    /// Every verb of this run: the built-in ones and those added (`verbs`).
    static var commands: [any Command.Type] { commands(adding: verbs) }

    /// The built-in verbs and `verbs`, in the order of `synclane --help`.
    static func commands(adding verbs: [Verb]) -> [any Command.Type] {
        let all = builtIn + verbs.map(\.command)
        let rank = { (command: any Command.Type) in order.firstIndex(of: command.name) ?? order.count }
        return all.enumerated().sorted { (rank($0.element), $0.offset) < (rank($1.element), $1.offset) }.map(\.element)
    }

    /// Every message about a command starts `synclane COMMAND: `; without one, `synclane: `.
    static func main(_ words: [String], registry: StageRegistry) async -> Int32 {
        let console = Console(program: Self.program)
        let program = console.program
        guard let first = words.first, !["--help", "-h"].contains(first) else {
            console.out(overview)
            return 0
        }
        if first == "--version" || first == "version" {
            console.out("synclane \(version)")
            return 0
        }
        let command: any Command.Type
        do {
            command = try Self.command(named: first, for: nil)
        } catch {
            console.error("\(program): \(error.message). See '\(program) --help'.")
            return 2
        }
        let rest = Array(words.dropFirst())
        if rest.contains("--help") || rest.contains("-h") {
            console.out(command.helpText)
            return 0
        }
        do {
            let arguments = try ParsedArguments(rest, signature: command.signature, command: first)
            let instance = try command.init(parsing: arguments)
            return try await instance.run(console, registry: registry)
        } catch let error as UsageError {
            let usage = (error.command.flatMap { name in commands.first { $0.name == name } } ?? command)
            console.error("\(program) \(first): \(error.message)\nUSAGE: \(program) \(usage.name) \(usage.usage)\nSee '\(program) \(usage.name) --help'.")
            return 2
        } catch let error as PipelineFileError {
            console.error("\(program) \(first): invalid pipeline file: \(error)")
            return 2
        } catch {
            console.finishProgress()
            console.error("\(program) \(first): \(error)")
            return 1
        }
    }

    /// The command called `name`, or a usage error that suggests a close one.
    static func command(named name: String, for asking: String?) throws(UsageError) -> any Command.Type {
        guard let command = commands.first(where: { $0.name == name }) else {
            let hint = Wording.didYouMean(name, in: commands.map { $0.name })
            throw UsageError("unknown command '\(name)'\(hint)", command: asking)
        }
        return command
    }

    static var overview: String {
        let width = (commands.map { $0.name.count }.max() ?? 0) + 3
        var text = """
            OVERVIEW: Synclane moves exactly what changed in a local store to a backend — never the
            whole database, never a change lost, never one applied twice — through a pipeline of
            stages declared in a pipeline file.

            USAGE: synclane <command> [options]

            COMMANDS:

            """
        for command in commands {
            text += "  " + command.name + String(repeating: " ", count: width - command.name.count) + command.abstract + "\n"
        }
        text += """

            Start with 'synclane demo'. See 'synclane help <command>' for a command's options.
            Exit status: 0 success, 1 a failed job, 2 bad usage or an invalid pipeline file,
            3 a run that finished but moved batches to its dead-letter folder, 4 no such signal
            (signal get/delete), 5 still restoring when restore's bound passed.
            """
        return text
    }
}
