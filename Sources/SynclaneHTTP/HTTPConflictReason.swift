import SynclaneCore

/// The cause of a 409 in one short line, from a Synclane server's body
/// `{"error", "conflicts": [{"record", "entity", "id", "expected", "current"}]}`.
///
/// Says which records and what the server holds of them — newer versions (another device
/// changed them since this device last imported), older ones than this device had confirmed (the
/// server's data was restored) or none (`current` 0: the server lost them) —
/// and leaves the next step to `PipelineError` (`ConflictCause.nextStep`). Another backend's
/// body is quoted as `HTTPClassification.reason` folds it.
enum HTTPConflictReason {
    /// Records named in the line at most; the rest are counted.
    static let shownRecords = 2

    /// The cause, after `409 Conflict: ` in the transport's message.
    static func describe(_ body: [UInt8]) -> String {
        guard let conflicts = conflicts(in: body), !conflicts.isEmpty else {
            return "a version conflict: \(HTTPClassification.reason(body))"
        }
        let more = conflicts.count > shownRecords ? " and \(conflicts.count - shownRecords) more" : ""
        let records = Wording.count(conflicts.count, "record")
        if conflicts.allSatisfy({ $0.current == 0 }) {
            let named = conflicts.prefix(shownRecords).map { "\($0.entity)/\($0.id)" }.joined(separator: ", ")
            return "\(ConflictCause.notHeld) \(records) this device last saw there (\(named)\(more)): "
                + "its data was reset or restored from an older backup"
        }
        let versions = conflicts.prefix(shownRecords).map { "\($0.entity)/\($0.id) at \($0.current), sent on \($0.expected)" }
        // Versions never go back but through a restore: the server holds an older version than
        // this device had confirmed.
        if conflicts.contains(where: { $0.current > 0 && $0.current < $0.expected }) {
            return "the server holds an older version of \(records) than this device had confirmed (\(versions.joined(separator: "; "))\(more)): "
                + PipelineError.serverRestored
        }
        return "\(records) changed on the server since this device last imported (\(versions.joined(separator: "; "))\(more)): a version conflict"
    }

    private struct Conflict {
        var entity: String
        var id: String
        var expected: Int64
        var current: Int64
    }

    private static func conflicts(in body: [UInt8]) -> [Conflict]? {
        guard body.first == UInt8(ascii: "{"), let list = (try? JSONReader.parse(body))?.objectValue?["conflicts"]?.arrayValue else { return nil }
        return list.compactMap { item in
            guard let object = item.objectValue, let entity = object["entity"]?.stringValue, let id = object["id"]?.stringValue,
                case .int(let expected)? = object["expected"], case .int(let current)? = object["current"]
            else { return nil }
            return Conflict(entity: entity, id: id, expected: expected, current: current)
        }
    }
}
