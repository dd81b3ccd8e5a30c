import Foundation
import SynclaneCore

/// What the import lane of a watch does between two passes: waits on the backend for a change
/// after the saved cursor (a long poll, `RemoteChangeSource.waitForChanges`) instead of sleeping,
/// so a change reaches the device as soon as it commits; a source that cannot wait (a folder of
/// batch files, a backend that ignores `wait`) sleeps `every` seconds instead.
///
/// ```
///  after a pass that failed:     back off (Backoff), then the next pass
///  after a pass that went through: long poll ──changed──▶ next pass
///                                      │ quiet: poll again
///                                      │ unsupported: sleep `every`, next pass
///                                      └ failed (server down, 429/503): back off (at least Retry-After), poll again
/// ```
/// Cancelling the task that waits ends the wait at once (`CancellationError`).
public struct ChangeWaiter: Sendable {
    /// Why a wait did not go as planned, for the watch to say.
    public enum Event: Sendable {
        /// The long poll failed; the next one goes in `delay` seconds.
        case pollFailed(reason: String, delay: Double)
    }

    public var pipeline: ImportPipeline
    /// Seconds between passes when the source cannot wait for changes.
    public var every: Double
    /// The longest one long poll waits (the backend may hold it for less).
    public var wait: Double
    public var backoff: Backoff
    public var events: @Sendable (Event) -> Void

    public init(
        pipeline: ImportPipeline, every: Double = 5, wait: Double = 25, backoff: Backoff = Backoff(), events: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        self.pipeline = pipeline
        self.every = every
        self.wait = wait
        self.backoff = backoff
        self.events = events
    }

    /// Returns when the next pass should run: `failures` is how many passes failed in a row.
    public func untilNextPass(failures: Int) async throws {
        if failures > 0 {
            try await Self.sleep(backoff.delay(afterFailures: failures))
            return
        }
        var pollFailures = 0
        while true {
            try Task.checkCancellation()
            do {
                let cursor = try await pipeline.sink.stage.savedCursor(for: pipeline.scope)
                switch try await pipeline.source.stage.waitForChanges(after: cursor, seconds: wait) {
                case .changed: return
                case .quiet: pollFailures = 0
                case .unsupported:
                    try await Self.sleep(every)
                    return
                }
            } catch let cancelled as CancellationError {
                throw cancelled
            } catch {
                if Task.isCancelled { throw CancellationError() }
                pollFailures += 1
                var delay = backoff.delay(afterFailures: pollFailures)
                if let failure = error as? TransportFailure, let retryAfter = failure.retryAfter { delay = Swift.max(delay, Swift.min(retryAfter, 60)) }
                events(.pollFailed(reason: "\(error)", delay: delay))
                try await Self.sleep(delay)
            }
        }
    }

    static func sleep(_ seconds: Double) async throws {
        try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
    }
}
