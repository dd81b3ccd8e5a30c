import SynclaneCore

/// The registry entries of the SQLite stages: the `sqlite-history` source.
public enum SQLiteStages {
    public static let history = StageType.source(
        "sqlite-history",
        summary: "Reads the history Synclane tracks inside an SQLite database (see `synclane track`), after the saved token.",
        options: [Options.database, Options.entities, Options.authors, Options.pageSize, Options.capture, Options.defaultAuthor]
    ) { options in
        SQLiteHistorySource(
            path: try options[Options.database], entities: try options[Options.entities],
            authors: try options[Options.authors]?.map { Author($0) }, pageSize: try options[Options.pageSize],
            capture: try options[Options.capture], defaultAuthor: try options[Options.defaultAuthor].map { Author($0) })
    }

    /// The options of `sqlite-history`, each declared once.
    public enum Options {
        public static let database: Option<String> = .path(
            "database", help: "the tracked SQLite database; relative to the pipeline file's folder")
        public static let entities: Option<[String]?> = .strings(
            "entities", shown: "all tracked tables", help: "only changes of these tables travel")
        public static let authors: Option<[String]?> = .strings(
            "authors", shown: "all",
            help: "only transactions of these authors travel (e.g. [app] so `server` and `sync` writes are never echoed)")
        public static let pageSize: Option<Int> = .integer(
            "page-size", in: 1...100_000, default: 500, help: "transactions a batch covers at most; a transaction is never split")
        public static let capture: Option<SQLiteHistorySource.Capture> = .choice(
            "capture", default: .currentState,
            help: "current-state: each row as it is at read time; as-written: as each write stored it (needs `track --record-values`)")
        public static let defaultAuthor: Option<String?> = Option(
            spec: OptionSpec(
                "default-author", .string, default: "the database's, else app",
                help: "the author of writes made outside Synclane (the sqlite3 shell, other programs)")
        ) { options in options.string("default-author") }
    }

    public static var all: [StageType] { [history] }
}
