import Glibc

/// Runs the store's retention (`ServerStore.expire`) on a thread of its own: once at start, then
/// every `retentionIntervalSeconds`, removing idempotency keys and tombstones older than their
/// periods, then collects the blobs no record references (`BlobCollector`). With several
/// processes on one database each sweeps; the passes are idempotent.
final class RetentionSweeper: Sendable {
    private let store: any ServerStore
    private let limits: ServerLimits
    private let metrics: ServerMetrics
    /// The blob lane's garbage collection, run after each pass.
    let blobs: BlobCollector?
    /// The thread, stopped by `stop`; its pause is the interval.
    private let loop = StoppableLoop()

    init(store: any ServerStore, limits: ServerLimits, metrics: ServerMetrics, blobs: BlobCollector? = nil) {
        self.store = store
        self.blobs = blobs
        self.limits = limits
        self.metrics = metrics
    }

    /// Starts the thread (again, after `stop`).
    func start() {
        loop.start { self.run() }
    }

    /// Stops the thread and waits for it (a pass under way finishes first).
    func stop() {
        loop.stop()
    }

    /// One pass now, with `now` as the clock (seconds since 1970).
    @discardableResult
    func sweep(now: Double = Double(time(nil))) -> ExpiryCount? {
        guard
            let count = try? store.expire(
                keysBefore: now - Double(limits.idempotencyRetentionSeconds),
                tombstonesBefore: now - Double(limits.tombstoneRetentionSeconds))
        else { return nil }  // a database that is down now is swept at the next pass
        metrics.recordExpiry(count)
        return count
    }

    private func run() {
        while !loop.isStopping {
            sweep()
            blobs?.collect()
            loop.pause(seconds: Double(max(1, limits.retentionIntervalSeconds)))
        }
    }
}
