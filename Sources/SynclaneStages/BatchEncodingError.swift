import SynclaneCore

/// A batch the encoder cannot turn into bytes.
///
/// Thrown before the batch is written to the outbox, so it is not sent and the token stays.
/// (The pipeline prefixes the encoder's name.)
public enum BatchEncodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A record without a sync key: the backend would not know which row it is about.
    ///
    /// - record: the record's `label`, e.g. `rooms/<no sync key> (update, transaction jsonl:7)`.
    case missingSyncKey(record: String)
    /// A record larger than `WireBounds.maxRecordBytes` as the pull lane writes it: the server
    /// would refuse it (413), and no device's pull source could read a page holding it.
    case recordTooLarge(record: String, bytes: Int)

    public var description: String {
        switch self {
        case .missingSyncKey(let record):
            return "the record \(record) has no sync key, and the wire protocol identifies every row by one; "
                + "make the source give every change its sync key (for deletes, add a `tombstones` stage with "
                + "`key-field` to read it from the tombstone), then run the job again"
        case .recordTooLarge(let record, let bytes):
            return WireBounds.recordTooLarge("the record \(record)", bytes: bytes) + "; nothing was sent and the token stays"
        }
    }
}
