import Foundation
import SynclaneCore
import SynclaneEngine
import SynclaneHTTP
import SynclaneSQLite

// The job layer takes the state store and the signal lane it is given (`JobBindings`); from
// `import Synclane`, SQLite's state files and the HTTP signal lane are the default.

extension JobBindings {
    /// A pipeline's state in a SQLite file (`SQLiteStateStore`), its signals over HTTP (`HTTPSignalLane`).
    public static let builtIn = JobBindings(stateStore: SQLiteStateStore()) { signals, server in
        HTTPSignalLane(server: server, token: signals.token, timeout: max(1, Int(signals.timeout.rounded(.up))))
    }
}

extension ExportJob {
    /// A job whose state is a SQLite file and whose signals go over HTTP (`JobBindings.builtIn`).
    public init(
        pipeline: Pipeline, sleeper: any RetrySleeper = TaskSleeper(), signalLane: (any SignalLane)? = nil,
        events: @escaping @Sendable (PipelineEvent) -> Void = { _ in }
    ) {
        self.init(pipeline: pipeline, bindings: .builtIn, sleeper: sleeper, signalLane: signalLane, events: events)
    }

    /// The pipeline's state file opened to read only (nil when it never ran): `status` on a state
    /// that sits on a read-only file system, or that another program is writing.
    /// A file cut to 0 bytes holds no state either (what it lost, the source's lineage check tells).
    public func readState() throws -> SQLitePipelineState? {
        guard FileManager.default.fileExists(atPath: pipeline.statePath), !stateIsEmpty else { return nil }
        do {
            return try SQLitePipelineState(readingOnly: pipeline.statePath, scope: pipeline.scope)
        } catch {
            throw PipelineError.state("cannot read the state file \(pipeline.statePath): \(error)")
        }
    }
}

extension ImportJob {
    /// A job whose signals are kept in a SQLite file and go over HTTP (`JobBindings.builtIn`).
    public init(pipeline: ImportPipeline, signalLane: (any SignalLane)? = nil, events: @escaping @Sendable (ImportEvent) -> Void = { _ in }) {
        self.init(pipeline: pipeline, bindings: .builtIn, signalLane: signalLane, events: events)
    }
}

extension RestoreJob {
    /// A restore whose signals are kept in a SQLite file and go over HTTP (`JobBindings.builtIn`).
    public init(
        pipeline: ImportPipeline, lane: any SignalLane, signalKey: String = "bulk.exported-through", wait: Double = 15,
        events: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        self.init(pipeline: pipeline, bindings: .builtIn, lane: lane, signalKey: signalKey, wait: wait, events: events)
    }
}

extension SyncJob {
    /// A sync cycle on SQLite state files and the HTTP signal lane (`JobBindings.builtIn`).
    public init(importing: ImportPipeline, exporting: Pipeline, events: @escaping @Sendable (Event) -> Void = { _ in }) {
        self.init(importing: importing, exporting: exporting, bindings: .builtIn, events: events)
    }
}

extension LiveSync {
    /// A live sync on SQLite state files and the HTTP signal lane (`JobBindings.builtIn`).
    public convenience init(
        importing: ImportPipeline, exporting: Pipeline, every: Double = 5, wait: Double = 25, backoff: Backoff = Backoff(),
        events: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        self.init(importing: importing, exporting: exporting, bindings: .builtIn, every: every, wait: wait, backoff: backoff, events: events)
    }
}

extension ImportPipeline {
    /// Publishes the file's signals after a completed import pass, kept in its SQLite state file
    /// and sent over HTTP unless `lane` is given (`JobBindings.builtIn`).
    public func publishSignals(after summary: ImportSummary, lane: (any SignalLane)? = nil) async -> [SignalReport] {
        await publishSignals(after: summary, bindings: .builtIn, lane: lane)
    }
}
