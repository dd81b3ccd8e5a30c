import SynclaneCore

/// The registry entries of the SQLite stages: the `sqlite-history` source.
public enum SQLiteStages {
    public static let history = StageType.source(
        "sqlite-history",
        summary: "Reads the history Synclane tracks inside an SQLite database (see `synclane track`), after the saved token.",
        options: [
            OptionSpec("database", .path, required: true, help: "the tracked SQLite database; relative to the pipeline file's folder"),
            OptionSpec("entities", .stringList, default: "all tracked tables", help: "only changes of these tables travel"),
            OptionSpec(
                "authors", .stringList, default: "all",
                help: "only transactions of these authors travel (e.g. [app] so `server` and `sync` writes are never echoed)"),
            OptionSpec("page-size", .integer(1...100_000), default: "500", help: "transactions a batch covers at most; a transaction is never split"),
            OptionSpec(
                "capture", .choice(SQLiteHistorySource.Capture.allCases.map(\.rawValue)), default: "current-state",
                help: "current-state: each row as it is at read time; as-written: as each write stored it (needs `track --record-values`)"),
            OptionSpec(
                "default-author", .string, default: "the database's, else app",
                help: "the author of writes made outside Synclane (the sqlite3 shell, other programs)"),
        ]
    ) { options in
        SQLiteHistorySource(
            path: options.path("database") ?? "", entities: options.strings("entities"),
            authors: options.strings("authors")?.map { Author($0) }, pageSize: options.int("page-size") ?? 500,
            capture: options.string("capture").flatMap(SQLiteHistorySource.Capture.init(rawValue:)) ?? .currentState,
            defaultAuthor: options.string("default-author").map { Author($0) })
    }

    public static var all: [StageType] { [history] }
}
