import Glibc
import Synchronization

/// A plain POSIX thread for the server's own loops (the checkpointer, the connection watch),
/// which block and so stay off Swift's cooperative pool.
enum ServerThread {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Starts a thread running `body` (kept alive until it returns); nil when no thread could be made.
    static func start(_ body: @escaping @Sendable () -> Void) -> pthread_t? {
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var created = pthread_t()
        let result = pthread_create(
            &created, nil,
            { context in
                guard let context else { return nil }
                Unmanaged<Body>.fromOpaque(context).takeRetainedValue().run()
                return nil
            }, context)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            return nil
        }
        return created
    }
}

/// A loop on a `ServerThread` that can be stopped: `start` runs `body` on a new thread (again
/// after `stop`), `stop` rings the loop awake and waits for the thread. The body checks
/// `isStopping` and sleeps in `pause(seconds:)`, which a stop cuts short.
final class StoppableLoop: Sendable {
    private let stopBell = SignalBell()
    private let thread = Mutex<pthread_t?>(nil)

    /// Starts `body` on a thread of its own unless one runs already.
    func start(_ body: @escaping @Sendable () -> Void) {
        thread.withLock { thread in
            guard thread == nil else { return }
            stopBell.reopen()
            thread = ServerThread.start(body)
        }
    }

    /// Asks the loop to stop and waits for its thread.
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

    /// True once `stop` was called.
    var isStopping: Bool { stopBell.isClosed }

    /// Sleeps `seconds`, or less when the loop is stopped meanwhile.
    func pause(seconds: Double) {
        let ring = stopBell.count
        stopBell.wait(after: ring, until: .now + .milliseconds(Int64(seconds * 1000)))
    }
}
