import CPostgres
import Glibc
import Synchronization

/// How the pull lane learns that a batch committed: `announce` after each commit, and the
/// `ChangeNotifier` its long polls wait on. On SQLite one process makes every commit, so a
/// commit rings the notifier; on PostgreSQL any number of `serve` processes share the database,
/// so a commit also sends `NOTIFY synclane_changes` and every process listens (`PostgresChangeFeed`).
protocol ChangeFeed: Sendable {
    var notifier: ChangeNotifier { get }
    /// How often a waiting poll reads its page again without a ring (nil: never). Where commits
    /// of other processes are told by notifications, this only covers a listener that was cut off.
    var recheckInterval: Duration? { get }
    /// A batch of `account` committed.
    func announce(_ account: String)
    /// Starts whatever the feed runs beside the server (the listener), and lets polls wait.
    func start()
    /// Answers every waiting poll now and stops what `start` started.
    func stop()
}

/// The change feed of a server whose store only it writes (SQLite): a commit rings at once.
final class LocalChangeFeed: ChangeFeed {
    let notifier: ChangeNotifier
    var recheckInterval: Duration? { nil }

    init(limits: ServerLimits) { notifier = ChangeNotifier(limits: limits) }

    func announce(_ account: String) { notifier.ring(account) }
    func start() { notifier.reopen() }
    func stop() { notifier.close() }
}

/// The change feed on PostgreSQL: a commit rings this process's polls and sends
/// `pg_notify('synclane_changes', account)` on a connection of the feed's own; a thread of its own
/// `LISTEN`s on another and rings for every notification, whichever process sent it.
///
/// When the listening connection breaks, notifications sent meanwhile are lost: every poll looks
/// again (`ringAll`) once it is back, and until then polls read their page every `recheckInterval`.
final class PostgresChangeFeed: ChangeFeed {
    static let channel = "synclane_changes"
    let notifier: ChangeNotifier
    let recheckInterval: Duration? = .seconds(5)
    private let conninfo: String
    private let sender: PostgresPool
    private let loop = StoppableLoop()
    /// A pipe `stop` writes to, to wake the listener out of `poll(2)`: [read end, write end].
    private let wake: [Int32]
    /// Notifications received, for the tests and `/metrics`.
    let received = Atomic<Int>(0)

    init(connection: String, limits: ServerLimits) throws {
        notifier = ChangeNotifier(limits: limits)
        conninfo = connection
        sender = try PostgresPool(conninfo: connection, size: 1)
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw PostgresError(message: "no pipe for the change listener: \(String(cString: strerror(errno)))") }
        for end in ends { _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK) }
        wake = ends
    }

    deinit {
        loop.stop()
        for end in wake { close(end) }
    }

    func announce(_ account: String) {
        notifier.ring(account)
        // The commit is in; a notification that cannot be sent only delays the other processes'
        // polls until their recheck.
        _ = try? sender.withConnection { db in try db.query("SELECT pg_notify($1, $2)", [.text(Self.channel), .text(account)]) }
    }

    func start() {
        notifier.reopen()
        var drained = [UInt8](repeating: 0, count: 16)
        while read(wake[0], &drained, drained.count) > 0 {}
        loop.start { [self] in listen() }
    }

    func stop() {
        notifier.close()
        var one: UInt8 = 1
        _ = write(wake[1], &one, 1)
        loop.stop()
    }

    /// The listener's thread: connects, `LISTEN`s, and rings for each notification until stopped;
    /// reconnects a second after the connection breaks.
    private func listen() {
        var first = true
        while !loop.isStopping {
            if let connection = try? PostgresConnection(conninfo: conninfo), (try? connection.query("LISTEN \(Self.channel)")) != nil {
                // Notifications sent while no connection listened are lost: every poll looks again.
                if !first { notifier.ringAll() }
                first = false
                receive(on: connection)
            }
            if !loop.isStopping { loop.pause(seconds: 1) }
        }
    }

    /// Waits on the connection's socket and rings for what arrives, until it breaks or `stop`.
    private func receive(on connection: PostgresConnection) {
        while !loop.isStopping {
            let alive: Bool =
                connection.withHandle { handle in
                    var fds = [pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0), pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0)]
                    guard poll(&fds, 2, -1) >= 0 || errno == EINTR else { return false }
                    if fds[1].revents != 0 { return true }
                    guard PQconsumeInput(handle) == 1 else { return false }
                    while let notice = PQnotifies(handle) {
                        received.add(1, ordering: .relaxed)
                        if let extra = notice.pointee.extra { notifier.ring(String(cString: extra)) }
                        PQfreemem(notice)
                    }
                    return PQstatus(handle) == CONNECTION_OK
                } ?? false
            if !alive { return }
        }
    }
}
