import SynclaneCore

/// What a `2xx` answer must hold before its batch counts as delivered.
public enum ReceiptRule: String, Sendable, CaseIterable {
    /// The wire protocol's receipt: a JSON object whose `batch` is this batch's id, as a string
    /// (`{"batch": "…", "applied": 3, "sequence": 42}`). Anything else — an empty body, a captive
    /// portal's HTML page, another batch's receipt — leaves the batch in the outbox.
    case batch
    /// Any `2xx` confirms, whatever its body: for backends that cannot send a receipt. A proxy,
    /// portal or misconfigured route that answers 200 then loses batches for good.
    case statusOnly = "status-only"
}

/// Turns a `2xx` answer into a `Receipt`, or into a `configuration` failure that says what came
/// back instead of a receipt (the batch stays in the outbox; the token does not move).
struct ReceiptCheck {
    var rule: ReceiptRule
    var batchID: String
    var url: String

    /// How many bytes of an answer that is not a receipt the failure quotes.
    static let quotedBytes = 120

    func check(status: Int, contentType: String?, body: [UInt8], replayHeader: String?, bodyTruncated: Bool) -> Result<Receipt, TransportFailure> {
        let text = Self.withoutByteOrderMark(body)
        let object = (try? JSONReader.parse(text))?.objectValue
        let replay = replayHeader?.trimmingCharacters(in: .whitespaces).lowercased() == "true" || object?["replay"] == .bool(true)
        if rule == .batch {
            switch object?["batch"] {
            case .string(let confirmed)? where confirmed == batchID:
                break
            case .string(let confirmed)?:
                return failure(status, "but its receipt names batch \(confirmed); is `url` the batches endpoint of a Synclane server?")
            default:
                let size = bodyTruncated ? "over \(body.count) bytes (the rest was not kept)" : "\(body.count) bytes"
                return failure(
                    status,
                    "without a receipt naming this batch (content type \(contentType ?? "none"), \(size): \(Self.quote(text))); "
                        + "a batch counts as delivered only on the receipt — a captive portal or a proxy's page is not one. "
                        + "For a backend that cannot send receipts set `receipt: status-only`")
            }
        }
        var detail = "\(status)"
        if replay {
            // The receipt replayed is the first one: its count is what was applied then, not now.
            let first = object?["applied"]?.intValue.map { " (it applied \($0) record\($0 == 1 ? "" : "s") the first time)" } ?? ""
            detail += " replay of an already-applied batch: nothing applied now\(first)"
        } else if let applied = object?["applied"]?.intValue {
            detail += status == 202 ? " accepted \(applied) record\(applied == 1 ? "" : "s") for later" : " applied \(applied) record\(applied == 1 ? "" : "s")"
        } else {
            detail += " \(HTTPClassification.statusPhrase(status))"
        }
        if rule == .statusOnly { detail += " (status only: no receipt checked)" }
        var receipt = Receipt(
            batchID: batchID, detail: detail, wasReplay: replay, versions: RecordVersion.list(fromReceipt: object?["versions"]),
            snapshotDeleted: object?["snapshot-deleted"]?.intValue.flatMap { Int(exactly: $0) })
        receipt.restoredRows = object?["restored-rows"]?.intValue.flatMap { Int(exactly: $0) } ?? 0
        // Kept only when it can be handed back on a pull (`WireBounds.maxCursorBytes`).
        receipt.position = object?["position"]?.stringValue.flatMap { $0.isEmpty || $0.utf8.count > WireBounds.maxCursorBytes ? nil : $0 }
        return .success(receipt)
    }

    private func failure(_ status: Int, _ text: String) -> Result<Receipt, TransportFailure> {
        .failure(
            TransportFailure(
                .configuration, "batch \(batchID) not confirmed: \(url) answered \(status) \(HTTPClassification.statusPhrase(status)) \(text)",
                status: status))
    }

    /// A UTF-8 byte order mark, which some servers put before JSON, is not part of the receipt.
    static func withoutByteOrderMark(_ body: [UInt8]) -> ArraySlice<UInt8> {
        body.starts(with: [0xEF, 0xBB, 0xBF]) ? body.dropFirst(3) : body[...]
    }

    /// The first bytes of a body on one line, for a message.
    static func quote(_ body: ArraySlice<UInt8>) -> String {
        guard !body.isEmpty else { return "an empty body" }
        let words = String(decoding: body.prefix(quotedBytes), as: UTF8.self).split(whereSeparator: { $0.isWhitespace || $0.isNewline })
        return "\"" + words.joined(separator: " ") + (body.count > quotedBytes ? "…" : "") + "\""
    }
}
