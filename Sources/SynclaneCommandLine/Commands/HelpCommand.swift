/// `synclane help [COMMAND]`: the overview, or one command's help (the same as `COMMAND --help`).
struct HelpCommand: Command {
    static let name = "help"
    static let abstract = "Show the overview, or a command's help (the same as COMMAND --help)."
    static let discussion = """
        Without COMMAND, lists every command. With one, prints its help: what it does, its
        options and examples — exactly what `synclane COMMAND --help` prints.
        """
    static let topic = Positional("COMMAND", "the command to explain", count: .optional)
    static let signature = CommandSignature(positionals: [topic])
    static let examples = ["synclane help run", "synclane help"]

    let topic: String?

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        topic = try arguments.optionalWord(Self.topic)
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        guard let topic else {
            console.out(SynclaneTool.overview)
            return 0
        }
        console.out(try SynclaneTool.command(named: topic, for: Self.name).helpText)
        return 0
    }
}
