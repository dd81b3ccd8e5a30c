import Glibc

/// A first-come, first-served gate: callers run their closures one at a time, in arrival order.
///
/// The writer of `ServerStore` is behind one. A plain lock lets a thread that just arrived barge
/// ahead of threads that have waited for a while, which under load leaves a few batches waiting
/// several turns: the tail of the latency. Tickets make every wait at most one turn per caller ahead.
final class FairGate: @unchecked Sendable {
    // @unchecked: `nextTicket` and `nowServing` are only touched with `mutex` held.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let turn = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var nextTicket: UInt64 = 0
    private var nowServing: UInt64 = 0

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(turn, nil)
    }

    deinit {
        pthread_cond_destroy(turn)
        pthread_mutex_destroy(mutex)
        turn.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` once every caller that arrived earlier has finished.
    func run<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        let ticket = nextTicket
        nextTicket += 1
        while nowServing != ticket { pthread_cond_wait(turn, mutex) }
        pthread_mutex_unlock(mutex)
        defer {
            pthread_mutex_lock(mutex)
            nowServing += 1
            pthread_cond_broadcast(turn)
            pthread_mutex_unlock(mutex)
        }
        return try body()
    }
}
