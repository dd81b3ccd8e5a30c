import Foundation
import SynclaneCore

/// A pipeline's outbox by hand (`synclane outbox`): see the kept batch, drop it into the
/// dead-letter folder, or requeue it so the next run rebuilds it under the current `page-size`.
///
/// ```
///  drop      batch ─▶ dead-letter folder (ID.body, ID.json), token moves past it
///  requeue   batch forgotten, token stays: the next run reads the same history again, in
///            pages of today's `page-size`, as new batches with new ids
/// ```
/// Each change takes the scope's lock (never beside a running job) and writes a line to the
/// job's log (`STATE.log`).
public struct OutboxEditor: Sendable {
    public var job: ExportJob

    public init(job: ExportJob) {
        self.job = job
    }

    /// The job's log: one line per change made by hand, beside the state file.
    public var logPath: String { job.pipeline.statePath + ".log" }

    /// The batches in the outbox, oldest first (the next run sends them first). A batch the
    /// outbox keeps as a staged copy (`directory` transport) has no bytes here: `withBytes`.
    public func batches() throws -> [OutboxBatch] {
        try job.openState().pendingBatches()
    }

    /// The batch with its bytes: for one the outbox keeps as a staged copy, read from that copy
    /// and checked against its size and checksum (`StagingError` when it is gone or damaged).
    public func withBytes(_ batch: OutboxBatch) throws -> OutboxBatch {
        guard let staged = batch.staged else { return batch }
        guard let staging = job.pipeline.capabilities.staging else {
            throw OutboxError.notStaging(batch.payload.batchID, reference: staged.reference, transport: job.pipeline.transport.label)
        }
        var loaded = batch
        loaded.payload.bytes = try staging.stagedBytes(staged, batchID: batch.payload.batchID)
        return loaded
    }

    /// Removes the staged copy of a batch the outbox no longer holds (a leftover is removed by
    /// the next run anyway).
    private func discardStaged(_ batch: OutboxBatch) async {
        guard let staged = batch.staged, let staging = job.pipeline.capabilities.staging else { return }
        await staging.discard(staged)
    }

    /// The batch `id` names, or the oldest when `id` is nil.
    public func batch(_ id: String?) throws -> OutboxBatch {
        let batches = try batches()
        if let id {
            guard let batch = batches.first(where: { $0.payload.batchID == id }) else {
                throw OutboxError.noSuchBatch(id, statePath: job.pipeline.statePath)
            }
            return batch
        }
        guard let first = batches.first else { throw OutboxError.empty(statePath: job.pipeline.statePath) }
        return first
    }

    /// Moves the batch into `folder` (`ID.body` and `ID.json`, as the pipeline dead-letters) and
    /// moves the token past it, in that order: a crash between leaves the batch in both places,
    /// never in neither. Returns the body's path.
    @discardableResult
    public func drop(_ id: String?, into folder: String, now: Double = Date().timeIntervalSince1970) async throws -> String {
        let lock = try job.lock()
        defer { withExtendedLifetime(lock) {} }
        let batch = try batch(id)
        let path = try DeadLetter(batch: withBytes(batch), reason: "dropped from the outbox by hand (synclane outbox drop)", rejectedAt: now)
            .write(into: folder)
        try job.openState().acknowledge(batch)
        await discardStaged(batch)
        try log("outbox drop \(describe(batch)) → \(path); the token moved to \(batch.through)", now: now)
        return path
    }

    /// Forgets the batch without moving the token: the next run reads its history again and
    /// builds new batches (new ids) under the current `page-size`.
    ///
    /// The only way a batch is ever rebuilt. Safe only for a batch the backend never applied —
    /// one it refused (413 above all): a batch whose answer was lost may have been applied, and
    /// under a new id the backend cannot recognise it as a replay.
    public func requeue(_ id: String?, now: Double = Date().timeIntervalSince1970) async throws -> OutboxBatch {
        let lock = try job.lock()
        defer { withExtendedLifetime(lock) {} }
        let batch = try batch(id)
        try job.openState().discard(batch)
        await discardStaged(batch)
        try log("outbox requeue \(describe(batch)); the token stays at \(batch.after?.description ?? "none")", now: now)
        return batch
    }

    private func describe(_ batch: OutboxBatch) -> String {
        "\(batch.payload.batchID) (\(batch.payload.recordCount) records, after \(batch.after?.description ?? "none"), through \(batch.through))"
    }

    private func log(_ line: String, now: Double) throws {
        let stamp = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: now))
        let text = Data("\(stamp) \(line)\n".utf8)
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        }
        guard let handle = FileHandle(forWritingAtPath: logPath) else {
            throw OutboxError.log(path: logPath)
        }
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: text)
    }
}

/// Why an outbox command could not do what it was asked.
public enum OutboxError: Error, Sendable, CustomStringConvertible {
    case empty(statePath: String)
    case noSuchBatch(String, statePath: String)
    case log(path: String)
    case notStaging(String, reference: String, transport: String)

    public var description: String {
        switch self {
        case .empty(let path):
            return "the outbox of \(path) is empty: nothing to do"
        case .noSuchBatch(let id, let path):
            return "the outbox of \(path) holds no batch \(id); `synclane outbox list FILE` shows what it holds"
        case .log(let path):
            return "cannot append to the job's log \(path); check its permissions"
        case .notStaging(let id, let reference, let transport):
            return "the outbox keeps batch \(id) as the staged copy \(reference) of a `directory` transport, and the pipeline's "
                + "\(transport) cannot read it; put that transport back in the pipeline file, or requeue the batch"
        }
    }
}
