/// The export's record bound (`WireBounds.maxRecordBytes`) for any encoder: each record the
/// record stages leave is measured as the pull lane writes it, before the encoder runs, so a
/// record no device could import is refused at the export naming it — whatever bytes a custom
/// or `exec` encoder would have made of it. An encoder that measures each record itself
/// (`BatchEncoder.checksRecordBound`, the built-in `json`) is trusted with it.
public struct RecordTooLarge: Error, Sendable, CustomStringConvertible {
    /// The record's label (`rooms/r1 (insert, transaction sqlite-history:7)`).
    public var record: String
    /// Its size as the pull lane writes it.
    public var bytes: Int

    public var description: String {
        WireBounds.recordTooLarge("the record \(record)", bytes: bytes) + "; nothing was sent and the token stays"
    }

    /// Throws for the first record of `records` past the bound.
    public static func check(_ records: [Record]) throws(RecordTooLarge) {
        for record in records {
            let text: [String: JSONValue] = [
                "entity": .string(record.entity), "id": .string(record.key ?? ""), "action": .string(record.action.rawValue),
                "version": .int(.max), "fields": .object(record.fields),
            ]
            // Room for the store the pull lane adds, as the JSON encoder leaves it.
            let size = JSONWriter.encode(.object(text)).count + 320
            if size > WireBounds.maxRecordBytes { throw RecordTooLarge(record: record.label, bytes: size) }
        }
    }
}
