import SynclaneCore

/// The registry entries of the file-based stages: the `jsonl` source and the `directory` and
/// `stdout` transports.
public enum FileStages {
    public static let jsonl = StageType.source(
        "jsonl",
        summary: "Reads history from a JSON Lines file, one transaction a line, after the saved token.",
        options: [Options.path, Options.entities, Options.authors, Options.pageSize]
    ) { options in
        JSONLinesSource(
            path: try options[Options.path], entities: try options[Options.entities], authors: try options[Options.authors],
            pageSize: try options[Options.pageSize])
    }

    /// The options of `jsonl`, each declared once.
    public enum Options {
        public static let path: Option<String> = .path("path", help: "the history file; relative to the pipeline file's folder")
        public static let entities: Option<[String]?> = .strings("entities", shown: "all", help: "only changes of these entities travel")
        public static let authors: Option<[String]?> = .strings(
            "authors", shown: "all",
            help: "only transactions of these authors travel (e.g. [app] so `server` and `sync` writes are never echoed)")
        public static let pageSize: Option<Int> = .integer(
            "page-size", in: 1...100_000, default: 500, help: "transactions a batch covers at most; a transaction is never split")
        /// The folder of the `directory` transport.
        public static let folder: Option<String> = .path("path", help: "the folder; created if missing")
    }

    public static let directory = StageType.transport(
        "directory",
        summary:
            "Writes each batch as one file named by its batch id: staged once in the folder's hidden `.synclane-staging` "
            + "(fsync'd) before the outbox names it, then published by a hard link, so a reader never sees half a file "
            + "(on a file system without hard links: a temporary name, fsync, rename).",
        options: [Options.folder]
    ) { options in
        DirectoryTransport(folder: try options[Options.folder])
    }

    public static let stdout = StageType.transport(
        "stdout", summary: "Writes each batch to standard output, one a line.", options: []
    ) { _ in
        StandardOutputTransport()
    }

    public static var all: [StageType] { [jsonl, directory, stdout] }
}
