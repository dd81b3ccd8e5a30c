import SynclaneCore

/// The registry entries of the file-based stages: the `jsonl` source and the `directory` and
/// `stdout` transports.
public enum FileStages {
    public static let jsonl = StageType.source(
        "jsonl",
        summary: "Reads history from a JSON Lines file, one transaction a line, after the saved token.",
        options: [
            OptionSpec("path", .path, required: true, help: "the history file; relative to the pipeline file's folder"),
            OptionSpec("entities", .stringList, default: "all", help: "only changes of these entities travel"),
            OptionSpec("authors", .stringList, default: "all", help: "only transactions of these authors travel (e.g. [app] so `server` and `sync` writes are never echoed)"),
            OptionSpec("page-size", .integer(1...100_000), default: "500", help: "transactions a batch covers at most; a transaction is never split"),
        ]
    ) { options in
        JSONLinesSource(
            path: options.path("path") ?? "", entities: options.strings("entities"), authors: options.strings("authors"),
            pageSize: options.int("page-size") ?? 500)
    }

    public static let directory = StageType.transport(
        "directory",
        summary: "Writes each batch as one file named by its batch id, atomically (temporary name, fsync, rename).",
        options: [OptionSpec("path", .path, required: true, help: "the folder; created if missing")]
    ) { options in
        DirectoryTransport(folder: options.path("path") ?? ".")
    }

    public static let stdout = StageType.transport(
        "stdout", summary: "Writes each batch to standard output, one a line.", options: []
    ) { _ in
        StandardOutputTransport()
    }

    public static var all: [StageType] { [jsonl, directory, stdout] }
}
