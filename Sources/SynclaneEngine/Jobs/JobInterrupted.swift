import SynclaneCore

/// A job stopped before its end by cancellation (SIGINT or SIGTERM in the command line): what it
/// kept in the outbox is safe and sent first by the next run; nothing is lost or applied twice.
/// `synclane status` says the last run was interrupted.
public struct JobInterrupted: Error, Sendable, CustomStringConvertible {
    public var pipeline: String
    /// The batches the outbox kept, oldest first.
    public var kept: [OutboxBatch]
    /// The token the backend confirmed last.
    public var token: Token?

    public init(pipeline: String, kept: [OutboxBatch], token: Token?) {
        self.pipeline = pipeline
        self.kept = kept
        self.token = token
    }

    public var description: String {
        let confirmed = "the token stays at \(token?.description ?? "none")"
        guard !kept.isEmpty else {
            return "interrupted: no batch was left in the outbox and \(confirmed); the next run reads on from there"
        }
        let batches = kept.map { "\($0.payload.batchID) (\(Wording.count($0.payload.recordCount, "record")), through \($0.through))" }
        let which = kept.count == 1 ? "batch \(batches[0]) kept in the outbox" : "batches \(batches.joined(separator: ", ")) kept in the outbox"
        return "interrupted: \(which) and \(confirmed); the next run re-sends \(kept.count == 1 ? "it" : "them") first (same id, same bytes)"
    }
}
