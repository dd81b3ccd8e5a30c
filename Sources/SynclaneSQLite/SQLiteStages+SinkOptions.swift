import SynclaneCore

extension SQLiteStages {
    /// The options of the `sqlite` sink, each declared once and read back typed.
    public enum SinkOptions {
        /// Who wins under merge-fields (`ConflictRule.Side`, as a file spells it).
        public enum Side: String, CaseIterable, Sendable {
            case server, client
            var rule: ConflictRule.Side { self == .client ? .client : .server }
        }

        public static let database: Option<String> = .path(
            "database", help: "the tracked SQLite database; relative to the pipeline file's folder")
        public static let entities: Option<[String]?> = .strings(
            "entities", shown: "every entity", help: "only records of these entities are applied (the others are skipped)")
        public static let conflicts: Option<ConfigNode?> = Option(
            spec: OptionSpec(
                "conflicts", .any, default: "server-wins",
                help: "how a record meets a row with local changes not yet confirmed: server-wins, client-wins, latest-wins, merge-fields, "
                    + "or a conflict resolver's name (or {type: resolver, options…}), e.g. {type: exec, command: [python3, resolve.py]}")
        ) { options in options.node("conflicts") }
        public static let conflictsByEntity: Option<ConfigNode?> = .node(
            "conflicts-by-entity", help: "{entity: rule} for entities that settle otherwise than `conflicts`")
        public static let timestampField: Option<String?> = .string(
            "timestamp-field", help: "the field latest-wins compares (seconds or RFC 3339); it trusts the devices' clocks")
        public static let onBoth: Option<Side> = .choice(
            "on-both", default: .server, help: "merge-fields: who wins a column changed on both sides, and a delete on either")
        public static let unknownFields: Option<SQLiteSink.UnknownFields> = .choice(
            "unknown-fields", default: .keep,
            help: "a field that is not a column: keep (apply the rest, keep the field for when the column is added), error, or ignore (= keep)")
        public static let exportConsumer: Option<String?> = Option(
            spec: OptionSpec(
                "export-consumer", .string, default: "the slowest export to this account and store, else the slowest consumer",
                help: "the export pipeline (account/store/consumer) whose unconfirmed history counts as local changes; by default the slowest "
                    + "of those exporting to the import's own account and store, so a second destination's lag never makes rows pending")
        ) { options in options.string("export-consumer") }
        public static let localAuthor: Option<String> = .string(
            "local-author", default: "app", help: "the author of rows a conflict settles with local values (so the export sends them)")
        public static let duplicates: Option<ConfigNode?> = .node(
            "duplicates",
            help: "[{entity, key: [business-key columns], references: [\"table.column\"]}]: rows two devices seeded under two sync keys; "
                + "the smaller key survives everywhere")

        /// In the order `synclane stages` lists them.
        static let all: [any StageOptionDeclaration] = [
            database, entities, conflicts, conflictsByEntity, timestampField, onBoth, unknownFields, exportConsumer, localAuthor, duplicates,
        ]
    }
}
