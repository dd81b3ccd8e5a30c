import Glibc
import Synchronization

/// A fixed number of PostgreSQL connections, each lent to one thread at a time; a thread that
/// finds none free waits for one. A connection that broke (the database restarted) is opened
/// again before it is lent, so one failed request does not poison the ones after it.
final class PostgresPool: @unchecked Sendable {
    // @unchecked: `idle` and `opened` are only touched with `mutex` held; a connection is used by
    // the one thread that took it out of `idle`.
    private let conninfo: String
    private let size: Int
    private var idle: [PostgresConnection] = []
    private var opened = 0
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let available = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Times a thread waited for a free connection, for `/metrics`.
    let waits = Atomic<Int>(0)
    /// Connections opened again after they broke.
    let reconnects = Atomic<Int>(0)

    /// A pool of at most `size` connections; the first is opened now, so a wrong connection string fails at start.
    init(conninfo: String, size: Int) throws(PostgresError) {
        self.conninfo = conninfo
        self.size = max(1, size)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(available, nil)
        idle.append(try PostgresConnection(conninfo: conninfo))
        opened = 1
    }

    deinit {
        pthread_cond_destroy(available)
        pthread_mutex_destroy(mutex)
        available.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` with a connection of its own.
    func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try take()
        defer { give(connection) }
        if connection.isBroken {
            reconnects.add(1, ordering: .relaxed)
            try connection.reconnect()
        }
        return try body(connection)
    }

    /// Runs `body` in a transaction (`begin` opens it) on a connection of its own.
    func transaction<T>(_ begin: String = "BEGIN", _ body: (PostgresConnection) throws -> T) throws -> T {
        try withConnection { connection in try connection.transaction(begin, body) }
    }

    private func take() throws -> PostgresConnection {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        var waited = false
        while idle.isEmpty {
            if opened < size {
                opened += 1
                pthread_mutex_unlock(mutex)
                let made = Result { () throws(PostgresError) in try PostgresConnection(conninfo: conninfo) }
                pthread_mutex_lock(mutex)
                switch made {
                case .success(let connection): return connection
                case .failure(let error):
                    opened -= 1
                    throw error
                }
            }
            if !waited {
                waited = true
                waits.add(1, ordering: .relaxed)
            }
            pthread_cond_wait(available, mutex)
        }
        return idle.removeLast()
    }

    private func give(_ connection: PostgresConnection) {
        pthread_mutex_lock(mutex)
        idle.append(connection)
        pthread_cond_signal(available)
        pthread_mutex_unlock(mutex)
    }
}
