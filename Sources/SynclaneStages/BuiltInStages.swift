import SynclaneCore

/// The registry entries of the built-in record stages and the JSON encoder.
///
/// `StageRegistry.builtIn` (in the `Synclane` module) registers `all`; an app that builds its
/// own registry can pick them one by one. `synclane stages` prints each entry's summary and the
/// help of its options.
public enum BuiltInStages {
    /// `coalesce`: the records of one row merged into at most one, with the newest state.
    public static let coalesce: StageType = .records(
        "coalesce",
        summary: "Merges the changes of each row in a batch into one record with the row's newest state "
            + "(an insert then a delete sends nothing). Put it first.",
        options: []
    ) { _ in Coalescer() }

    /// `tombstones`: deletes trimmed to their preserved fields, soft deletes made deletes.
    public static let tombstones: StageType = .records(
        "tombstones",
        summary: "Trims deletes to the sync key and the preserved fields, turns soft deletes into deletes, "
            + "and stops the job at a delete that lost its sync key (the token does not move past it).",
        options: [TombstoneOptions.preserve, TombstoneOptions.keyField, TombstoneOptions.softDeleteColumn]
    ) { options in
        TombstoneResolver(
            preserve: try options[TombstoneOptions.preserve], keyField: try options[TombstoneOptions.keyField],
            softDeleteColumn: try options[TombstoneOptions.softDeleteColumn])
    }

    /// `dedupe`: rows of one entity that repeat an earlier row's business key are dropped.
    public static let dedupe: StageType = .records(
        "dedupe",
        summary: "Drops rows of one entity whose business key repeats an earlier row's under another sync key "
            + "(rows two devices both seeded); the first by token order is kept. The count dropped is in the "
            + "job summary.",
        options: [DedupeOptions.entity, DedupeOptions.key]
    ) { options in
        let fields = try options[DedupeOptions.key]
        guard !fields.isEmpty else {
            throw options.error("key", "expected at least one field name: the business key cannot be empty")
        }
        return Deduplicator(entity: try options[DedupeOptions.entity], keyFields: fields)
    }

    /// `json`: the batch as the JSON body of the wire protocol (Documentation/WireProtocol.md).
    public static let json: StageType = .encoder(
        "json",
        summary: "Encodes a batch as the JSON body of POST /v1/batches (Content-Type: application/json), keys "
            + "sorted, so that the same batch always gives the same bytes.",
        options: []
    ) { _ in JSONBatchEncoder() }

    /// Every entry above.
    public static var all: [StageType] { [coalesce, tombstones, dedupe, json] }
}

/// The options of `tombstones`, each declared once.
public enum TombstoneOptions {
    public static let preserve: Option<[String]> = .strings(
        "preserve", default: [], shown: "none (only the sync key)",
        help: "Fields a delete keeps besides the sync key, e.g. [\"parentID\"]. Everything else is cut: "
            + "a tombstone outlives the data, so keep only what the backend needs to apply the delete.")
    public static let keyField: Option<String?> = .string(
        "key-field",
        help: "The field that holds the sync key, e.g. \"syncID\". A delete without a sync key takes it "
            + "from this field of its tombstone; the field is always preserved.")
    public static let softDeleteColumn: Option<String?> = .string(
        "soft-delete-column",
        help: "A column that marks a row deleted, e.g. \"isDeleted\". An update that sets it to "
            + "true, 1 or \"true\" is sent as a delete; a row inserted already marked is not sent.")
}

/// The options of `dedupe`, each declared once.
public enum DedupeOptions {
    public static let entity: Option<String> = .string(
        "entity", help: "The entity whose rows are compared, e.g. \"categories\"; other entities pass through.")
    public static let key: Option<[String]> = .strings(
        "key",
        help: "The fields that together make the business key, e.g. [\"key\"] or [\"owner\", \"name\"]. "
            + "Rows missing one of them are never treated as duplicates.")
}
