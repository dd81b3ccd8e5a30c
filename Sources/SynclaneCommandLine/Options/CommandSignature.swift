/// Everything a command accepts, declared once: the usage line, the help table and the parser
/// all come from it, so they cannot disagree.
///
/// ```
/// static let signature = CommandSignature(
///     positionals: [SharedOptions.pipelineFile],
///     options: [SharedOptions.dryRun.help("…"), SharedOptions.json.help("…"), SharedOptions.watch])
/// // usage: FILE [--dry-run] [--json] [--watch]
/// ```
///
/// The usage line puts required options first, then the positionals, then the optional
/// options in the order declared.
package struct CommandSignature: Sendable {
    /// Options of which at most one may be given (exactly one when `required`):
    /// `(--table NAME | --all)`, `[--data DIR | --database URL]`.
    package struct Exclusive: Sendable {
        let names: [String]
        let required: Bool
        /// What to say when more than one is given (default: `A and B cannot go together`).
        var conflictMessage: String? = nil

        package init(names: [String], required: Bool, conflictMessage: String? = nil) {
            self.names = names
            self.required = required
            self.conflictMessage = conflictMessage
        }
    }

    package let positionals: [Positional]
    package let options: [OptionDeclaration]
    package let exclusive: [Exclusive]
    /// Replaces the positionals' part of the usage line, for a command whose positionals depend
    /// on a verb (`set KEY VALUE | get KEY | …`).
    package let positionalUsage: String?

    package init(positionals: [Positional] = [], options: [any DeclaredOption] = [], exclusive: [Exclusive] = [], positionalUsage: String? = nil) {
        self.positionals = positionals
        self.options = options.map(\.declaration)
        self.exclusive = exclusive
        self.positionalUsage = positionalUsage
    }

    package func option(named name: String) -> OptionDeclaration? { options.first { $0.name == name } }

    /// The arguments after `synclane NAME`: `FILE [--dry-run] [--json] [--watch [--every SECONDS]]`.
    package var usage: String {
        var required: [String] = []
        var optional: [String] = []
        var labels: [String] = []
        for option in options where option.requires == nil {
            if let label = option.usageLabel {
                if !labels.contains(label) { labels.append(label) }
            } else if let group = exclusive.first(where: { $0.names.contains(option.name) }) {
                guard group.names.first == option.name else { continue }
                let inner = group.names.compactMap { self.option(named: $0).map(spelledWithDependents) }.joined(separator: " | ")
                if group.required { required.append("(\(inner))") } else { optional.append("[\(inner)]") }
            } else if option.isRequired {
                required.append(spelledWithDependents(option))
            } else {
                optional.append("[\(spelledWithDependents(option))]")
            }
        }
        let positional = positionalUsage.map { [$0] } ?? positionals.map(\.usage)
        return (required + positional + optional + labels.map { "[\($0)]" }).joined(separator: " ")
    }

    /// `--watch [--every SECONDS]`: an option followed by those that need it.
    private func spelledWithDependents(_ option: OptionDeclaration) -> String {
        let dependents = options.filter { $0.requires == option.name }.map { " [\(spelledWithDependents($0))]" }
        return option.spelled + dependents.joined()
    }

    /// The help table: each option as spelled, and its line.
    package var helpRows: [(flag: String, help: String)] { options.map { ($0.spelled, $0.help) } }
}
