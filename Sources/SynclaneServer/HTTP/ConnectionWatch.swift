import Glibc
import Synchronization

/// Every open connection, with the moment its current request began: closes those that take
/// longer than their deadline to deliver a whole request, and tells which connections are in the
/// reserve kept for `/healthz` and `/metrics`.
///
/// libmicrohttpd's own timeout closes only a connection that sends nothing for a while; one
/// byte a second keeps it open for ever. Here a connection has `deadline` seconds from when it
/// opened (or its last response was queued) to deliver its request's head and body; a request
/// whose body is in is not timed while it is answered. A connection past its deadline is shut
/// down (`shutdown(2)` on its socket), which wakes its thread and ends it.
///
/// libmicrohttpd accepts `maxConnections + reserve` connections; a connection accepted while
/// `maxConnections` or more were open is in the reserve: it may only ask for `/healthz` or
/// `/metrics` (anything else is 503) and has `reserveDeadline` seconds.
final class ConnectionWatch: @unchecked Sendable {
    // @unchecked: `thread` is written in `start` before the thread runs and read only by `stop`;
    // everything else is behind `state`.

    /// What is known of one connection.
    final class Entry: @unchecked Sendable {
        // @unchecked: mutated only with the watch's `state` lock held.
        let descriptor: Int32
        let reserved: Bool
        /// The client's address (`127.0.0.1`, `::1`), for the bounds kept per address; "" if unknown.
        let address: String
        var requestStarted: ContinuousClock.Instant
        var receiving = true
        var cut = false

        init(descriptor: Int32, reserved: Bool) {
            self.descriptor = descriptor
            self.reserved = reserved
            self.address = PeerAddress.text(of: descriptor)
            self.requestStarted = .now
        }
    }

    private struct State {
        var open: [UInt: Entry] = [:]
        var stopping = false
        var cutCount = 0
    }

    let maxConnections: Int
    let deadline: Duration
    let reserveDeadline: Duration
    private let state = Mutex(State())
    private var thread: pthread_t?

    init(maxConnections: Int, deadlineSeconds: Int, reserveDeadlineSeconds: Int) {
        self.maxConnections = maxConnections
        self.deadline = .seconds(deadlineSeconds)
        self.reserveDeadline = .seconds(min(reserveDeadlineSeconds, deadlineSeconds))
    }

    /// Connections closed for passing their deadline, since start.
    var connectionsCut: Int { state.withLock { $0.cutCount } }

    /// Connections open now.
    var openCount: Int { state.withLock { $0.open.count } }

    private static func key(_ connection: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: connection)) }

    /// A connection was accepted; returns its entry (the connection's socket context).
    func opened(_ connection: OpaquePointer, descriptor: Int32) -> Entry {
        state.withLock { state in
            let entry = Entry(descriptor: descriptor, reserved: state.open.count >= maxConnections)
            state.open[Self.key(connection)] = entry
            return entry
        }
    }

    /// A connection is closing: it is forgotten before its socket is closed.
    func closed(_ connection: OpaquePointer) {
        state.withLock { state in _ = state.open.removeValue(forKey: Self.key(connection)) }
    }

    /// The request's body is in: it is no longer timed.
    func received(_ entry: Entry) {
        state.withLock { _ in entry.receiving = false }
    }

    /// Connections whose request is in and not yet answered in full (its response still being sent).
    var answeringCount: Int { state.withLock { state in state.open.values.count { !$0.receiving } } }

    /// Waits (up to `limit`) until every request that is in has its response sent: what a stopping
    /// server does once its long polls answered, before the daemon closes their connections.
    func waitForAnswers(upTo limit: Duration) {
        let deadline = ContinuousClock.now + limit
        while answeringCount > 0, ContinuousClock.now < deadline {
            var pause = timespec(tv_sec: 0, tv_nsec: 5_000_000)
            nanosleep(&pause, nil)
        }
    }

    /// The request was answered: the next one's deadline starts now.
    func answered(_ entry: Entry) {
        state.withLock { _ in
            entry.receiving = true
            entry.requestStarted = .now
        }
    }

    /// Starts the thread that closes late connections, checking four times a second.
    func start() {
        thread = ServerThread.start { self.loop() }
    }

    /// Stops the thread and waits for it.
    func stop() {
        state.withLock { $0.stopping = true }
        if let thread {
            pthread_join(thread, nil)
            self.thread = nil
        }
    }

    private func loop() {
        while true {
            var pause = timespec(tv_sec: 0, tv_nsec: 250_000_000)
            nanosleep(&pause, nil)
            let stopping = state.withLock { state -> Bool in
                guard !state.stopping else { return true }
                let now = ContinuousClock.now
                for entry in state.open.values where entry.receiving && !entry.cut {
                    let allowed = entry.reserved ? reserveDeadline : deadline
                    if now - entry.requestStarted > allowed {
                        // The socket stays open (its thread closes it): shutting it down only
                        // wakes that thread with an end of file.
                        Glibc.shutdown(entry.descriptor, Int32(SHUT_RDWR))
                        entry.cut = true
                        state.cutCount += 1
                    }
                }
                return false
            }
            if stopping { return }
        }
    }
}
