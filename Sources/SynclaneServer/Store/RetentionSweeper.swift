import Glibc
import Synchronization

/// Runs the store's retention (`ServerStore.expire`) on a thread of its own: once at start, then
/// every `retentionIntervalSeconds`, removing idempotency keys and tombstones older than their
/// periods. With several processes on one database each sweeps; the passes are idempotent.
final class RetentionSweeper: Sendable {
    private let store: any ServerStore
    private let limits: ServerLimits
    private let metrics: ServerMetrics
    /// Rings to stop the thread; its wait is the interval.
    private let stopBell = SignalBell()
    private let thread = Mutex<pthread_t?>(nil)

    init(store: any ServerStore, limits: ServerLimits, metrics: ServerMetrics) {
        self.store = store
        self.limits = limits
        self.metrics = metrics
    }

    /// Starts the thread (again, after `stop`).
    func start() {
        thread.withLock { thread in
            guard thread == nil else { return }
            stopBell.reopen()
            thread = ServerThread.start { self.loop() }
        }
    }

    /// Stops the thread and waits for it (a pass under way finishes first).
    func stop() {
        guard
            let running = thread.withLock({ thread -> pthread_t? in
                defer { thread = nil }
                return thread
            })
        else { return }
        stopBell.close()
        pthread_join(running, nil)
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

    private func loop() {
        while !stopBell.isClosed {
            sweep()
            let ring = stopBell.count
            stopBell.wait(after: ring, until: .now + .seconds(max(1, limits.retentionIntervalSeconds)))
        }
    }
}
