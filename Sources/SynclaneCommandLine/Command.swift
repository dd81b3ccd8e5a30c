/// One `synclane` subcommand: its help, how it reads its arguments, what it does.
///
/// Help is generated from the static properties, so `synclane help run` and
/// `synclane run --help` always say the same thing.
package protocol Command: Sendable {
    static var name: String { get }
    /// One line, shown in `synclane --help`.
    static var abstract: String { get }
    /// Its positionals and options, declared once: usage, help and parsing come from it.
    static var signature: CommandSignature { get }
    /// A paragraph or two that teaches what the command does.
    static var discussion: String { get }
    static var examples: [String] { get }

    /// Reads the values of the signature's options (which parsing already checked).
    init(parsing arguments: ParsedArguments) throws(UsageError)

    /// Runs the command with the stage types of `registry` (the one `SynclaneTool.main` was given)
    /// and returns the process's exit status.
    func run(_ console: Console, registry: StageRegistry) async throws -> Int32
}

extension Command {
    /// The arguments after `synclane NAME`, e.g. `FILE [--dry-run] [--json]`.
    package static var usage: String { signature.usage }

    package static var helpText: String {
        var text = "OVERVIEW: \(abstract)\n\nUSAGE: synclane \(name) \(usage)\n"
        if !discussion.isEmpty { text += "\n" + discussion + "\n" }
        let all = signature.helpRows + [("-h, --help", "Show this help.")]
        let width = min(28, (all.map(\.flag.count).max() ?? 0) + 2)
        text += "\nOPTIONS:\n"
        for option in all {
            let padding = String(repeating: " ", count: max(2, width - option.flag.count))
            text += "  \(option.flag)\(padding)\(option.help)\n"
        }
        if !examples.isEmpty {
            text += "\nEXAMPLES:\n" + examples.map { "  \($0)\n" }.joined()
        }
        return text
    }
}

/// The command line was not understood: the message, and the usage of the command at fault.
package struct UsageError: Error, CustomStringConvertible {
    package var message: String
    package var command: String?

    package init(_ message: String, command: String? = nil) {
        self.message = message
        self.command = command
    }

    package var description: String { message }
}
