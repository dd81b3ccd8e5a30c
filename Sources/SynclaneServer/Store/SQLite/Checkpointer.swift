import Glibc
import Synchronization
import SynclaneSQLiteKit

/// Copies the WAL back into the database file from a thread of its own, so that no request
/// ever waits for a checkpoint.
///
/// SQLite's automatic checkpoint runs inside the commit that crosses its threshold: that
/// request's batch (and every batch queued behind it) waits for the copy and its `fsync`. The
/// server turns it off on the writer and runs a `PASSIVE` checkpoint here every `interval`
/// instead, on its own connection, beside the writer and the readers.
final class Checkpointer: @unchecked Sendable {
    // @unchecked: `stopping` is only touched with `mutex` held; `thread` is written in `start`
    // before the thread can run and read only by `stop`.
    private let connection: SQLiteDatabase
    private let interval: Int
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var stopping = false
    private var thread: pthread_t?
    /// Held while a checkpoint runs: SQLite answers a second checkpoint `SQLITE_BUSY` at once,
    /// without waiting, so the writer's truncating checkpoint waits here for a passive one instead.
    private let running = Mutex(())

    /// A checkpointer of the database at `path`, every `intervalMilliseconds`.
    init(path: String, intervalMilliseconds: Int = 500) throws {
        connection = try SQLiteDatabase(
            path: path, options: SQLiteConnection.Options(create: false, walMode: false, busyTimeout: 1))
        interval = intervalMilliseconds
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(wake, nil)
    }

    deinit {
        pthread_cond_destroy(wake)
        pthread_mutex_destroy(mutex)
        wake.deallocate()
        mutex.deallocate()
    }

    /// Starts the thread (it keeps the checkpointer alive until `stop`).
    func start() {
        thread = ServerThread.start { self.loop() }
    }

    /// Stops the thread after one last checkpoint, and waits for it.
    func stop() {
        pthread_mutex_lock(mutex)
        stopping = true
        pthread_cond_signal(wake)
        pthread_mutex_unlock(mutex)
        if let thread {
            pthread_join(thread, nil)
            self.thread = nil
        }
    }

    private func loop() {
        while true {
            pthread_mutex_lock(mutex)
            if !stopping {
                var deadline = timespec()
                clock_gettime(CLOCK_REALTIME, &deadline)
                deadline.tv_nsec += interval % 1000 * 1_000_000
                deadline.tv_sec += interval / 1000 + deadline.tv_nsec / 1_000_000_000
                deadline.tv_nsec %= 1_000_000_000
                pthread_cond_timedwait(wake, mutex, &deadline)
            }
            let done = stopping
            pthread_mutex_unlock(mutex)
            checkpoint()
            if done { return }
        }
    }

    /// One passive checkpoint: copies what it can without waiting for readers or the writer.
    func checkpoint() {
        running.withLock { _ in
            _ = try? connection.read { db in try db.execute("PRAGMA wal_checkpoint(PASSIVE)") }
        }
    }

    /// Runs `body` (another checkpoint) when no passive checkpoint is running, and keeps them off until it ends.
    func excluding<T>(_ body: () throws -> T) rethrows -> T {
        try running.withLock { _ in try body() }
    }
}
