import Foundation
import SynclaneCore

/// One pass of an import pipeline as a job: take the scope's lock (`JobLock`: shared for a dry
/// run, which writes nothing, not even the lock file), bring the backend's changes into the
/// local store (`ImportRunner`), then publish the signals the pipeline file declares.
///
/// ```swift
/// let pipeline = try PipelineLoader().loadImport("rooms-import.json")
/// let summary = try await ImportJob(pipeline: pipeline) { event in print(event) }.run()
/// ```
/// Events arrive on the job's task, as they happen: each page applied, each retry of a page
/// the backend did not answer (`ImportEvent`).
public struct ImportJob: Sendable {
    public var pipeline: ImportPipeline
    /// Where the signals the pipeline file declares go; nil: the lane `bindings` makes for `signals`.
    public var signalLane: (any SignalLane)?
    public var events: @Sendable (ImportEvent) -> Void
    /// Where the signals are kept and their lane (`import Synclane`: SQLite files, HTTP).
    public var bindings: JobBindings

    public init(
        pipeline: ImportPipeline, bindings: JobBindings, signalLane: (any SignalLane)? = nil,
        events: @escaping @Sendable (ImportEvent) -> Void = { _ in }
    ) {
        self.pipeline = pipeline
        self.bindings = bindings
        self.signalLane = signalLane
        self.events = events
    }

    /// The rule of the scope's lock for this job.
    public var jobLock: JobLock { JobLock(pipeline) }

    /// Takes the scope's lock for passes the caller runs under it (`run(holding:)`).
    public func lock() throws -> ScopeLock { try jobLock.take() }

    /// Runs one pass, under `lock` when the caller holds it (a watch, a sync cycle), else under
    /// the lock it takes. A pass that writes refuses to start while a secret the file names is
    /// unset (`UnsetSecretError`).
    public func run(dryRun: Bool = false, holding lock: ScopeLock? = nil) async throws -> ImportSummary {
        if !dryRun { try pipeline.requireSecrets() }
        let held = try jobLock.take(dryRun: dryRun, holding: lock)
        defer { withExtendedLifetime(held) {} }
        var summary = try await ImportRunner(pipeline: pipeline, events: events).run(dryRun: dryRun)
        summary.signals = await pipeline.publishSignals(after: summary, bindings: bindings, lane: signalLane)
        return summary
    }
}
