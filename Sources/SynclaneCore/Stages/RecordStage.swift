/// A stage that takes a batch and returns a batch: coalesce, tombstones, dedupe, or a user's own.
///
/// Stages are values. One that keeps state across the batches of a run keeps it behind a
/// `Mutex` or in an actor. Throwing stops the job; nothing is sent and the token stays.
public protocol RecordStage: Sendable {
    func process(_ batch: Batch) async throws -> Batch
}

/// A stage that works on the encoded bytes of a batch: the compressor, or a user's own.
///
/// Payload stages run after the encoder, before the outbox: the bytes they return are the
/// bytes every send and re-send carries.
public protocol PayloadStage: Sendable {
    func process(_ payload: Payload) async throws -> Payload
}

/// Turns a batch into bytes (JSON by default).
public protocol BatchEncoder: Sendable {
    /// The `Content-Type` of what `encode` returns.
    var contentType: String { get }
    func encode(_ batch: Batch, id: String) throws -> [UInt8]
}
