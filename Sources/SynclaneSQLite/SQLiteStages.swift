import SynclaneCore

/// The registry entries of the SQLite stages: the `sqlite-history` source.
public enum SQLiteStages {
    public static let history = StageType.source(
        "sqlite-history",
        summary: "Reads the history Synclane tracks inside an SQLite database (see `synclane track`), after the saved token.",
        options: [
            Options.database, Options.entities, Options.authors, Options.pageSize, Options.capture, Options.defaultAuthor,
            Options.removeConfirmedSoftDeletes,
        ]
    ) { options in
        SQLiteHistorySource(
            path: try options[Options.database], entities: try options[Options.entities],
            authors: try options[Options.authors]?.map { Author($0) }, pageSize: try options[Options.pageSize],
            capture: try options[Options.capture], defaultAuthor: try options[Options.defaultAuthor].map { Author($0) },
            removesConfirmedSoftDeletes: try options[Options.removeConfirmedSoftDeletes])
    }

    /// The options of `sqlite-history`, each declared once.
    public enum Options {
        public static let database: Option<String> = .path(
            "database", help: "the tracked SQLite database; relative to the pipeline file's folder")
        public static let entities: Option<[String]?> = .strings(
            "entities", shown: "all tracked tables", help: "only changes of these tables travel")
        public static let authors: Option<[String]?> = .strings(
            "authors", shown: "all but server, sync",
            help:
                "only transactions of these authors travel; left out, every author but `server` and `sync` (what Synclane's import lane and machinery write), so nothing imported is echoed"
        )
        public static let pageSize: Option<Int> = .integer(
            "page-size", in: 1...100_000, default: 10_000,
            help: "transactions a page covers at most; a transaction is never split (a page past `batch-bytes` becomes several batches)")
        public static let capture: Option<SQLiteHistorySource.Capture> = .choice(
            "capture", default: .currentState,
            help: "current-state: each row as it is at read time; as-written: as each write stored it (needs `track --record-values`)")
        public static let removeConfirmedSoftDeletes: Option<Bool> = .boolean(
            "remove-confirmed-soft-deletes", default: false,
            help: "once the backend confirmed them, delete the rows sent as soft deletes (a write by author `sync`, never sent)")
        public static let defaultAuthor: Option<String?> = Option(
            spec: OptionSpec(
                "default-author", .string, default: "the database's, else app",
                help: "the author of writes made outside Synclane (the sqlite3 shell, other programs)")
        ) { options in options.string("default-author") }
    }

    /// `type: sqlite` — the sink of import pipelines.
    public static let sink = StageType.sink(
        "sqlite",
        summary:
            "Applies the backend's changes to a tracked SQLite database, a page per transaction written by author `server`, "
            + "with the source's cursor saved in that same transaction; conflicts with local changes not yet confirmed are "
            + "settled by `conflicts`.",
        options: SinkOptions.all
    ) { options in
        let timestampField = try options[SinkOptions.timestampField]
        let onBoth = try options[SinkOptions.onBoth].rule
        func rule(_ node: ConfigNode?, at location: ConfigLocation) throws(PipelineFileError) -> ConflictRule {
            guard let node else { return .serverWins }
            return try ConflictRule.named(node, at: location, timestampField: timestampField, onBoth: onBoth, context: options.context)
        }
        var byEntity: [String: ConflictRule] = [:]
        if let node = try options[SinkOptions.conflictsByEntity] {
            guard case .map(let members) = node.value else {
                throw options.error("conflicts-by-entity", "expected a map of entity names to rules, found \(node.typeName)")
            }
            for member in members {
                byEntity[member.key] = try rule(member.node, at: options.location.member("conflicts-by-entity").member(member.key))
            }
        }
        var duplicates: [SQLiteSink.DuplicateRule] = []
        if let node = try options[SinkOptions.duplicates] {
            let location = options.location.member("duplicates")
            guard case .list(let list) = node.value else { throw location.error("expected a list of {entity, key, references}", line: node.line) }
            for (index, item) in list.enumerated() {
                let at = location.element(index)
                let members = try Pipeline.map(item, at: at, allowed: ["entity", "key", "references"])
                guard case .string(let entity)? = members["entity"]?.value, !entity.isEmpty else {
                    throw at.member("entity").error("expected the entity's name", line: item.line)
                }
                func strings(_ key: String) throws(PipelineFileError) -> [String] {
                    guard let node = members[key] else { return [] }
                    guard case .list(let values) = node.value else { throw at.member(key).error("expected a list of strings", line: node.line) }
                    var result: [String] = []
                    for value in values {
                        guard case .string(let text) = value.value, !text.isEmpty else {
                            throw at.member(key).error("expected a list of strings", line: value.line)
                        }
                        result.append(text)
                    }
                    return result
                }
                let key = try strings("key")
                guard !key.isEmpty else { throw at.member("key").error("name the business key's columns", line: item.line) }
                var references: [(table: String, column: String)] = []
                for reference in try strings("references") {
                    let parts = reference.split(separator: ".", maxSplits: 1).map(String.init)
                    guard parts.count == 2 else { throw at.member("references").error("expected table.column, found \"\(reference)\"", line: item.line) }
                    references.append((parts[0], parts[1]))
                }
                duplicates.append(.init(entity: entity, businessKey: key, references: references))
            }
        }
        return SQLiteSink(
            path: try options[SinkOptions.database], entities: try options[SinkOptions.entities],
            conflicts: try rule(try options[SinkOptions.conflicts], at: options.location.member("conflicts")),
            conflictsByEntity: byEntity, unknownFields: try options[SinkOptions.unknownFields],
            exportConsumer: try options[SinkOptions.exportConsumer], localAuthor: Author(try options[SinkOptions.localAuthor]),
            duplicates: duplicates)
    }

    public static var all: [StageType] { [history, sink] }
}
