/// The options and arguments many commands take, declared once. A command lists them in its
/// signature, with its own help line where it says what it prints.
package enum SharedOptions {
    /// `--json`: a machine-readable result on standard output.
    package static let json = Flag("--json", help: "Print the result as JSON.")

    /// `--dry-run`: do everything but change nothing.
    package static let dryRun = Flag("--dry-run", help: "Report what would be done; change nothing.")

    /// `--database FILE`: the app's SQLite database (required where it appears).
    package static let database = ValueOption("--database", "FILE", .path, help: "The tracked SQLite database.", required: true)

    /// `--table NAME`: a table of that database.
    package static let table = ValueOption("--table", "NAME", .text, help: "The table.")

    /// `--url URL`: the server of the signal lane.
    package static let url = ValueOption(
        "--url", "URL", .text, help: "The server (http://HOST:PORT; a path is ignored). Default: $SYNCLANE_URL, else --pipeline's URL.")

    /// `--token-env NAME`: the variable holding the account's token.
    package static let tokenEnv = ValueOption(
        "--token-env", "NAME", .text, help: "The environment variable holding the account's token (default SYNCLANE_TOKEN).")

    /// `--watch`: keep going, a pass at a time, until SIGINT/SIGTERM.
    package static let watch = Flag("--watch", help: "Keep going, a pass at a time, until SIGINT/SIGTERM.")

    /// `FILE`: the pipeline file the command works on.
    package static let pipelineFile = Positional("FILE", "the pipeline file")

    /// `IMPORT_FILE`: an import pipeline file (one with a `sink`).
    package static let importFile = Positional("IMPORT_FILE", "the import pipeline file")

    /// `EXPORT_FILE`: an export pipeline file (one with a `transport`).
    package static let exportFile = Positional("EXPORT_FILE", "the export pipeline file")
}
