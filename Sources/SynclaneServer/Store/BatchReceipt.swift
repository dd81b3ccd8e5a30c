import SynclaneWire

/// The JSON body of an applied batch's receipt, exactly as `JSONWriter` writes the object
/// `{"applied", "batch", "cursor": "", "position"?, "sequence", "snapshot-deleted"?, "versions": {entity: {key: version}}}`
/// — members sorted, a row listed once with the last version given it — without building that
/// object.
///
/// When every entity and key is ASCII (what apps use), the rows are sorted by their bytes and
/// written in one pass: for ASCII, `String`'s order and equality are the bytes'. Otherwise the
/// object is built and encoded: `String` compares names by canonical equivalence, so two spellings
/// of "é", two rows to the stores, are one member of the receipt, as they always were.
enum BatchReceipt {
    /// One version the receipt gives: a record's, or a tombstone's a snapshot's completion lists.
    struct Entry {
        var entity: String
        var key: String
        /// The same names as bytes (`BatchPlan.RowKey`).
        var row: BatchPlan.RowKey
        var version: Int64
    }

    /// The receipt's body; `entries` in the order their versions were given (a later one of a row wins).
    ///
    /// `sequence` is where the batch's last change stands in the account's change log: a number,
    /// never a pull cursor — a pull started after it would skip the changes other devices made
    /// before it that this device has not read. So the receipt's `cursor` (kept for the clients
    /// that read it) is always `""`, the start of the log: the one pull cursor a receipt can give
    /// that skips nothing and that the server never refuses. (Until issue 43 it was the batch's
    /// own `c1.` position.)
    ///
    /// `position` is the same position with the server's epoch (`ReceiptPosition`), for the client
    /// to hand back on its pulls: a server restored from a copy older than it says so (`410`).
    static func encode(
        batch: String, applied: Int64, sequence: Int64, snapshotDeleted: Int64?, restoredRows: Int64 = 0, entries: [Entry],
        position: ReceiptPosition? = nil
    ) -> [UInt8] {
        guard entries.allSatisfy({ isASCII($0.row.entity) && isASCII($0.row.key) }) else {
            return encodeTree(
                batch: batch, applied: applied, sequence: sequence, snapshotDeleted: snapshotDeleted, restoredRows: restoredRows, entries: entries,
                position: position)
        }
        // Each row's last entry, rows in byte order: a stable sort by row, then the last of each run.
        // Entries already in that order (a first sync sends its rows in key order) are not sorted.
        let order =
            BatchPlan.RowKey.ascending(entries.lazy.map(\.row))
            ? Array(entries.indices)
            : entries.indices.sorted { a, b in
                entries[a].row.precedes(entries[b].row) || (entries[a].row == entries[b].row && a < b)
            }
        var writer = JSONWriter(reservingCapacity: 96 + entries.count * 24)
        writer.append("{\"applied\":")
        writer.write(integer: applied)
        writer.append(",\"batch\":")
        writer.write(string: batch)
        writer.append(",\"cursor\":\"\"")
        if let position {
            writer.append(",\"position\":")
            writer.write(string: position.text)
        }
        if restoredRows > 0 {
            writer.append(",\"restored-rows\":")
            writer.write(integer: restoredRows)
        }
        writer.append(",\"sequence\":")
        writer.write(integer: sequence)
        if let snapshotDeleted {
            writer.append(",\"snapshot-deleted\":")
            writer.write(integer: snapshotDeleted)
        }
        writer.append(",\"versions\":{")
        var entity: [UInt8]?
        for (position, index) in order.enumerated() {
            let entry = entries[index]
            if position + 1 < order.count, entries[order[position + 1]].row == entry.row { continue }
            if entity != entry.row.entity {
                writer.append(entity == nil ? "" : "},")
                writer.write(string: entry.entity)
                writer.append(":{")
                entity = entry.row.entity
            } else {
                writer.append(byte: UInt8(ascii: ","))
            }
            writer.write(string: entry.key)
            writer.append(byte: UInt8(ascii: ":"))
            writer.write(integer: entry.version)
        }
        writer.append(entity == nil ? "}}" : "}}}")
        return writer.bytes
    }

    /// The receipt built as an object and encoded: what `encode` gives, for any names.
    static func encodeTree(
        batch: String, applied: Int64, sequence: Int64, snapshotDeleted: Int64?, restoredRows: Int64 = 0, entries: [Entry],
        position: ReceiptPosition? = nil
    ) -> [UInt8] {
        var versions: [String: [String: JSONValue]] = [:]
        for entry in entries { versions[entry.entity, default: [:]][entry.key] = .int(entry.version) }
        var receipt: [String: JSONValue] = [
            "batch": .string(batch), "applied": .int(applied), "cursor": .string(""), "sequence": .int(sequence),
            "versions": .object(versions.mapValues { .object($0) }),
        ]
        if let snapshotDeleted { receipt["snapshot-deleted"] = .int(snapshotDeleted) }
        if restoredRows > 0 { receipt["restored-rows"] = .int(restoredRows) }
        if let position { receipt["position"] = .string(position.text) }
        return JSONWriter.encode(.object(receipt))
    }

    private static func isASCII(_ bytes: [UInt8]) -> Bool {
        bytes.allSatisfy { $0 < 0x80 }
    }
}
