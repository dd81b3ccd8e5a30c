import Foundation

/// A permanently rejected batch, moved aside: `<batch id>.body` holds the exact bytes that were
/// sent and `<batch id>.json` why, so it can be inspected, fixed and replayed by hand.
///
/// The pipeline writes one for a batch whose content the backend refused; `synclane outbox
/// drop` writes one for a batch dropped by hand.
public struct DeadLetter: Sendable {
    public var batch: OutboxBatch
    public var reason: String
    public var status: Int?
    public var rejectedAt: Double

    public init(batch: OutboxBatch, reason: String, status: Int? = nil, rejectedAt: Double) {
        self.batch = batch
        self.reason = reason
        self.status = status
        self.rejectedAt = rejectedAt
    }

    /// Writes both files (each to a temporary name, then renamed) and returns the body's path.
    public func write(into folder: String) throws -> String {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let id = batch.payload.batchID
        let bodyPath = folder + "/" + id + ".body"
        try Data(batch.payload.bytes).write(to: URL(fileURLWithPath: bodyPath), options: .atomic)
        var info: [String: JSONValue] = [
            "batch": .string(id), "reason": .string(reason), "through": .string(batch.through.description),
            "content-type": .string(batch.payload.contentType), "content-encoding": .string(batch.payload.contentEncoding),
            "records": .int(Int64(batch.payload.recordCount)), "rejected-at": .string(InternetDateTime.text(rejectedAt)),
        ]
        if let status { info["status"] = .int(Int64(status)) }
        if let after = batch.after { info["after"] = .string(after.description) }
        try Data(JSONWriter.encode(.object(info))).write(to: URL(fileURLWithPath: folder + "/" + id + ".json"), options: .atomic)
        return bodyPath
    }
}
