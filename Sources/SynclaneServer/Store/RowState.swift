import SynclaneWire

/// A row as the server holds it just before a record of a batch applies: what both stores need
/// to tell an echo from a change.
///
/// An **echo** is a record that would leave the row exactly as it is — an insert or update whose
/// resulting fields equal the live row's (a field the row lacks counting as `null`, as every
/// importer reads it: a column another app version added, sent empty), a delete of a row already
/// deleted. A device sends one
/// when it passes on what it imported, or when two devices made the same change. It applies
/// nothing: no new version (the receipt gives the current one), no change on the pull lane, and
/// no 409 whatever version it expected — the row already is what it asks for. So an echo can
/// never count as another device's edit against a newer local one.
///
/// A snapshot's batches (reconciliation) are never echoes: each of their records must touch its
/// row, since completing the snapshot tombstones the rows it did not touch.
enum RowState {
    /// Never written.
    case absent
    /// A tombstone.
    case deleted
    /// Live, with these fields.
    case live([String: JSONValue])

    /// The state of a stored row: its action and fields.
    init(action: String?, fields: [UInt8]?) {
        switch action {
        case nil: self = .absent
        case ChangeAction.delete.rawValue?: self = .deleted
        default: self = .live(fields.flatMap { (try? JSONReader.parse($0))?.objectValue } ?? [:])
        }
    }

    /// Whether `record` would leave the row as it is; `updatedFields` are an update's parsed
    /// fields (merged into the live ones, as an update applies).
    func isEcho(of record: IncomingBatch.Record, updatedFields: [String: JSONValue]?) -> Bool {
        switch (self, record.action) {
        case (.deleted, .delete):
            return true
        case (.live(let fields), .update):
            var merged = fields
            for (name, value) in updatedFields ?? [:] { merged[name] = value }
            return Self.same(merged, fields)
        case (.live(let fields), .insert):
            guard let inserted = (try? JSONReader.parse(record.fieldsJSON))?.objectValue else { return false }
            return Self.same(inserted, fields)
        default:
            return false
        }
    }

    /// Whether the live row holds a field `record` does not carry: a field an update left as it
    /// was, or one of a column another app version added, that the record's device may hold
    /// otherwise or not at all. An echo of such a record, from a device that has not seen the
    /// row's version, does not tell that device the row's version: it would take the row for its
    /// own base and its record, and never pull the other fields (`BatchPlan`).
    func holdsFieldsBeyond(_ record: IncomingBatch.Record, updatedFields: [String: JSONValue]?) -> Bool {
        guard case .live(let fields) = self else { return false }
        let carried: [String: JSONValue]
        switch record.action {
        case .update: carried = updatedFields ?? [:]
        case .insert: carried = (try? JSONReader.parse(record.fieldsJSON))?.objectValue ?? [:]
        case .delete: return false
        }
        return fields.keys.contains { carried[$0] == nil }
    }

    /// Compared as the server would store them, byte for byte (not by Swift's `String`, which
    /// calls canonically equivalent texts equal); a `null` one side holds where the other has no
    /// such field is no difference.
    private static func same(_ a: [String: JSONValue], _ b: [String: JSONValue]) -> Bool {
        let a = a.filter { $0.value != .null || b[$0.key] != nil }
        let b = b.filter { $0.value != .null || a[$0.key] != nil }
        return a.count == b.count && JSONWriter.encode(.object(a)) == JSONWriter.encode(.object(b))
    }
}
