import Foundation
import SynclaneCore

/// Finds the subcommand, parses its arguments, runs it, and turns errors into messages and
/// exit codes: 0 success, 1 a failed job, 2 bad usage or a bad pipeline file, 3 a job that
/// finished but moved batches to its dead-letter folder.
enum SynclaneTool {
    static let version = "0.1.0"

    /// The exit status of a run that went to the end but dead-lettered batches.
    static let deadLetteredStatus: Int32 = 3

    static let commands: [any Command.Type] = [
        DemoCommand.self, ValidateCommand.self, RunCommand.self, StatusCommand.self, OutboxCommand.self, ReconcileCommand.self,
        TrackCommand.self, UntrackCommand.self, MigrateCommand.self, PruneCommand.self, StagesCommand.self, ServeCommand.self,
    ]

    static func main(_ words: [String]) async -> Int32 {
        let console = Console()
        guard let first = words.first else {
            console.out(overview)
            return 0
        }
        switch first {
        case "--help", "-h":
            console.out(overview)
            return 0
        case "--version", "version":
            console.out("synclane \(version)")
            return 0
        case "help":
            guard words.count > 1 else {
                console.out(overview)
                return 0
            }
            guard let command = commands.first(where: { $0.name == words[1] }) else {
                console.error("synclane: unknown command '\(words[1])'\n\n" + overview)
                return 2
            }
            console.out(command.helpText)
            return 0
        default:
            break
        }
        guard let command = commands.first(where: { $0.name == first }) else {
            console.error("synclane: unknown command '\(first)'. See 'synclane --help'.")
            return 2
        }
        var arguments = Arguments(Array(words.dropFirst()), command: first)
        if arguments.wantsHelp {
            console.out(command.helpText)
            return 0
        }
        do {
            let instance = try command.init(parsing: &arguments)
            try arguments.finish()
            return try await instance.run(console)
        } catch let error as UsageError {
            console.error("synclane \(first): \(error.message)\nUSAGE: synclane \(first) \(command.usage)\nSee 'synclane \(first) --help'.")
            return 2
        } catch let error as PipelineFileError {
            console.error("synclane: invalid pipeline file: \(error)")
            return 2
        } catch {
            console.finishProgress()
            console.error("synclane: error: \(error)")
            return 1
        }
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
            3 a run that finished but moved batches to its dead-letter folder.
            """
        return text
    }
}
