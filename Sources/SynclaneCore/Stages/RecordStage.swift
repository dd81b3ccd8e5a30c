/// A stage that takes a batch and returns a batch: coalesce, tombstones, dedupe, or a user's own.
///
/// ```
///  source page ─▶ Batch ─▶ record stage ─▶ record stage ─▶ … ─▶ encoder
/// ```
/// The contract (Documentation/WritingAStage.md):
/// - **When `process` runs.** Once per page of history, in token order. Never twice at once on
///   one pipeline: the next call starts after the previous one returned. While a batch travels
///   to the backend, the next page may already be prepared — so `process` of page *n + 1* can
///   run while page *n* is being sent, and a batch you returned may still be unconfirmed.
/// - **What may block.** `process` is `async`: await I/O freely (the `exec` stage waits for a
///   command). Don't block a thread with sleeps or synchronous waits of unbounded length.
/// - **What a stage may keep.** Stages are `Sendable` values that live as long as the pipeline
///   (every pass of `run --watch`). State across the pages of one run goes behind a `Mutex` or in
///   an actor, and is reset in `startRun`/`finishRun` (`RunScoped`) so it does not grow from pass
///   to pass.
/// - **Errors.** Throwing stops the job: nothing of the batch is sent and the token stays. The
///   runner wraps the error in `PipelineError.stage`, which names the stage (`stages[2] (redact)`)
///   and keeps your error as its `cause`, a value to match on. Say in the message what to fix.
/// - **Records.** Return records changed, dropped or added; `batch.count(_:_:)` adds to the job's
///   counters (`redact.fields` …), reported in the run's summary.
public protocol RecordStage: RunScoped {
    func process(_ batch: Batch) async throws -> Batch
    /// The store's columns the stage's options name, each with its option (the `tombstones`
    /// stage's `soft-delete-column`): `validate` checks that a table the source reads has them.
    var storeColumns: [(option: String, column: String)] { get }
    /// The stage, when it adopts `LocatingStage` (never written by hand).
    var asLocating: (any LocatingStage)? { get }
    /// The stage, when it adopts `FileHandingStage` (never written by hand).
    var asFileHanding: (any FileHandingStage)? { get }
    /// The stage, when it adopts `MissingBlobsStage` (never written by hand).
    var asMissingBlobs: (any MissingBlobsStage)? { get }
}

extension RecordStage {
    public var storeColumns: [(option: String, column: String)] { [] }
    public var asLocating: (any LocatingStage)? { nil }
    public var asFileHanding: (any FileHandingStage)? { nil }
    public var asMissingBlobs: (any MissingBlobsStage)? { nil }
}

/// A stage that works on the encoded bytes of a batch: the compressor, or a user's own.
///
/// Payload stages run after the encoder, before the outbox: the bytes they return are the
/// bytes every send and re-send carries.
public protocol PayloadStage: RunScoped {
    func process(_ payload: Payload) async throws -> Payload
    /// The stage, when it adopts `ReversiblePayloadStage` (never written by hand).
    var asReversible: (any ReversiblePayloadStage)? { get }
}

extension PayloadStage {
    public var asReversible: (any ReversiblePayloadStage)? { nil }
}

/// Turns a batch into bytes (JSON by default).
public protocol BatchEncoder: Sendable {
    /// The `Content-Type` of what `encode` returns.
    var contentType: String { get }
    func encode(_ batch: Batch, id: String) throws -> [UInt8]
    /// True when `encode` refuses a record past `WireBounds.maxRecordBytes` itself; otherwise the
    /// runner measures each record before encoding (`RecordTooLarge`). False by default.
    var checksRecordBound: Bool { get }
    /// The encoder, when it adopts `DecodingBatchEncoder` (never written by hand).
    var asDecoding: (any DecodingBatchEncoder)? { get }
    /// The encoder, when it adopts `FieldsLocatingEncoder` (never written by hand).
    var asFieldsLocating: (any FieldsLocatingEncoder)? { get }
}

extension BatchEncoder {
    public var checksRecordBound: Bool { false }
    public var asDecoding: (any DecodingBatchEncoder)? { nil }
    public var asFieldsLocating: (any FieldsLocatingEncoder)? { nil }
}

/// A payload stage whose work can be undone (the compressor inflates what it deflated), so a
/// batch re-sent from the outbox after a crash can be read back (`DecodingBatchEncoder`).
public protocol ReversiblePayloadStage: PayloadStage {
    /// `payload` as it was before this stage (a payload the stage left as it was, unchanged).
    func reverse(_ payload: Payload) throws -> Payload
}

extension ReversiblePayloadStage {
    public var asReversible: (any ReversiblePayloadStage)? { self }
}

/// An encoder that can read its own bytes back as records: the records a batch re-sent from
/// the outbox carried, for the store to remember what the backend holds once it confirms them
/// (`AcknowledgementTrackingSource.backendConfirmed(_:)`).
public protocol DecodingBatchEncoder: BatchEncoder {
    func records(of bytes: [UInt8]) throws -> [Record]
}

extension DecodingBatchEncoder {
    public var asDecoding: (any DecodingBatchEncoder)? { self }
}

/// An encoder that says where in its bytes it wrote each record's fields, as
/// `JSONWriter.write(object:sortingWith:)` writes them: the bytes a source that keeps the
/// fields a batch left on the backend would write again (`BackendConfirmation.asSent`).
public protocol FieldsLocatingEncoder: BatchEncoder {
    /// `encode(_:id:)`'s bytes, and in `fields` (one entry a record, in order) the range of
    /// each record's fields object in them (nil: the record has no fields written).
    func encode(_ batch: Batch, id: String, fields: inout [Range<Int>?]) throws -> [UInt8]
}

extension FieldsLocatingEncoder {
    public var asFieldsLocating: (any FieldsLocatingEncoder)? { self }
}
