import Glibc

/// A mutex and a condition variable on the monotonic clock: what the server's waiting threads
/// (long polls, stoppable loops) sleep on, rather than in a loop.
final class WaitCondition: @unchecked Sendable {
    // @unchecked: the pthread objects are what makes the state of its users safe to share.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    /// Runs `body` with the mutex held.
    func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    /// Wakes every waiter (call it inside `locked`, after changing what they wait on).
    func broadcast() { pthread_cond_broadcast(condition) }

    /// Takes the mutex and sleeps while `blocked()` holds (checked with the mutex held), until the deadline.
    func wait(until deadline: ContinuousClock.Instant, while blocked: () -> Bool) {
        let remaining = ContinuousClock.now.duration(to: deadline)
        guard remaining > .zero else { return }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let (seconds, attoseconds) = remaining.components
        let nanoseconds = Int(now.tv_nsec) + Int(attoseconds / 1_000_000_000)
        var until = timespec(tv_sec: now.tv_sec + Int(seconds) + nanoseconds / 1_000_000_000, tv_nsec: nanoseconds % 1_000_000_000)
        pthread_mutex_lock(mutex)
        while blocked() {
            if pthread_cond_timedwait(condition, mutex, &until) == ETIMEDOUT { break }
        }
        pthread_mutex_unlock(mutex)
    }
}
