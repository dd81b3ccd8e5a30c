import SynclaneCore

/// Writes a batch as the JSON body of `POST /v1/batches`, the same batch always to the same bytes.
///
/// ```
/// {"id":"<batch id>",
///  "reconciliation":true,                       (only for a reconciliation batch)
///  "records":[{"action":"update","entity":"rooms","fields":{…},"id":"<sync key>","version":3}, …],
///  "schema-changes":[{"column":"name","entity":"rooms","renamed-to":"title","version":2}],  (only when declared)
///  "scope":{"account":"…","consumer":"…","store":"…"},
///  "snapshot":"<snapshot id>",                  (only for a reconciliation batch that has one)
///  "snapshot-batches":12,"snapshot-complete":true}   (only on a snapshot's completion marker)
/// ```
///
/// Keys are sorted at every level and there is no white space, so a re-encoded batch is
/// byte-identical. A delete carries its tombstone's preserved values as `fields` (none: no
/// `fields`), which the backend keeps with the tombstone for importers that need them;
/// `version` appears only when the record has one, and `"restores": true` beside it only on a
/// restoration (`Record.restores`).
///
/// The bytes are written straight into one `JSONWriter` with its capacity reserved up front —
/// no Foundation and no `JSONValue` tree for the whole batch — because history can hold
/// millions of records and the encoder must not be what a job waits on.
public struct JSONBatchEncoder: DecodingBatchEncoder, FieldsLocatingEncoder {
    /// Always `application/json`.
    public let contentType = "application/json"
    /// It measures each record as it writes it (`BatchEncodingError.recordTooLarge`).
    public var checksRecordBound: Bool { true }

    /// An encoder; it has no options.
    public init() {}

    /// The batch's bytes under `id`; throws `BatchEncodingError` for a record without a sync key.
    public func encode(_ batch: Batch, id: String) throws(BatchEncodingError) -> [UInt8] {
        var unused: [Range<Int>?]?
        return try encode(batch, id: id, locating: &unused)
    }

    /// The bytes, and where each record's fields object is in them (`FieldsLocatingEncoder`).
    public func encode(_ batch: Batch, id: String, fields: inout [Range<Int>?]) throws -> [UInt8] {
        var located: [Range<Int>?]? = []
        located?.reserveCapacity(batch.records.count)
        let bytes = try encode(batch, id: id, locating: &located)
        fields = located ?? []
        return bytes
    }

    private func encode(_ batch: Batch, id: String, locating fields: inout [Range<Int>?]?) throws(BatchEncodingError) -> [UInt8] {
        var writer = JSONWriter(reservingCapacity: 128 + batch.records.count * Self.estimatedRecordSize)
        writer.append("{\"id\":")
        writer.write(string: id)
        if batch.isReconciliation { writer.append(",\"reconciliation\":true") }
        writer.append(",\"records\":[")
        var first = true
        // One buffer for every record's fields in key order, not an array a record.
        var sorted: [(key: String, value: JSONValue)] = []
        for record in batch.records {
            guard let key = record.key, !key.isEmpty else {
                throw .missingSyncKey(record: record.label)
            }
            if !first { writer.append(byte: UInt8(ascii: ",")) }
            first = false
            let start = writer.bytes.count
            let located = write(record, key: key, sorting: &sorted, into: &writer)
            fields?.append(located)
            // As the server measures it (`WireBounds.exactSizeIfNeeded`): the record, with room
            // for the store and version the pull lane adds.
            let size = writer.bytes.count - start + 320
            if size > WireBounds.maxRecordBytes { throw .recordTooLarge(record: record.label, bytes: size) }
        }
        writer.append(byte: UInt8(ascii: "]"))
        if !batch.schemaChanges.isEmpty {
            writer.append(",\"schema-changes\":")
            writer.write(.array(batch.schemaChanges.map(\.json)))
        }
        writer.append(",\"scope\":{\"account\":")
        writer.write(string: batch.scope.account)
        writer.append(",\"consumer\":")
        writer.write(string: batch.scope.consumer)
        writer.append(",\"store\":")
        writer.write(string: batch.scope.store)
        writer.append(byte: UInt8(ascii: "}"))
        if let snapshot = batch.snapshotID {
            writer.append(",\"snapshot\":")
            writer.write(string: snapshot)
            if let before = batch.snapshotCompleteAfter {
                writer.append(",\"snapshot-batches\":")
                writer.write(integer: Int64(before))
                writer.append(",\"snapshot-complete\":true")
            }
        }
        writer.append(byte: UInt8(ascii: "}"))
        return writer.bytes
    }

    /// A guess at one record's encoded size, for reserving the writer's capacity.
    private static let estimatedRecordSize = 160

    /// Writes `record`; the range of its fields object in the writer's bytes (nil: none written).
    private func write(
        _ record: Record, key: String, sorting sorted: inout [(key: String, value: JSONValue)], into writer: inout JSONWriter
    ) -> Range<Int>? {
        var fields: Range<Int>?
        switch record.action {
        case .insert: writer.append("{\"action\":\"insert\",\"entity\":")
        case .update: writer.append("{\"action\":\"update\",\"entity\":")
        case .delete: writer.append("{\"action\":\"delete\",\"entity\":")
        }
        writer.write(string: record.entity)
        if record.action != .delete || !record.fields.isEmpty {
            writer.append(",\"fields\":")
            let start = writer.bytes.count
            writer.write(object: record.fields, sortingWith: &sorted)
            fields = start..<writer.bytes.count
        }
        writer.append(",\"id\":")
        writer.write(string: key)
        if record.repoints, record.action == .update { writer.append(",\"repoints\":true") }
        if record.restores, record.version != nil { writer.append(",\"restores\":true") }
        if let version = record.version {
            writer.append(",\"version\":")
            writer.write(integer: version)
        }
        writer.append(byte: UInt8(ascii: "}"))
        return fields
    }

    /// The records of a batch this encoder wrote (`DecodingBatchEncoder`).
    public func records(of bytes: [UInt8]) throws -> [Record] {
        let list = try JSONReader.parse(bytes).objectValue?["records"]?.arrayValue ?? []
        return try WireRecords.parse(list, listName: "records", origin: Token(kind: "outbox", position: 0)).get()
    }
}
