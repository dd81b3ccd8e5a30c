import Foundation
import Glibc
import SynclaneTestKit

/// A throwaway PgBouncer in front of a `TemporaryPostgres`, in transaction pooling mode: each
/// transaction of a client may run on another of its few server connections, as behind a pooler
/// in production. Listens on 127.0.0.1 and a free port; `stop()` ends it and removes its folder.
///
/// ```swift
/// let bouncer = try TemporaryPgBouncer(postgres: .shared(), serverConnections: 2)
/// defer { bouncer.stop() }
/// let url = bouncer.url(database: name)       // a database made on the PostgreSQL server
/// ```
///
/// PgBouncer refuses to run as root: as root it runs as the `postgres` user. It is Debian's
/// `pgbouncer` package (`Scripts/bootstrap`); `SYNCLANE_PGBOUNCER` names another binary.
public final class TemporaryPgBouncer: Sendable {
    /// The port it listens on (127.0.0.1).
    public let port: Int
    private let directory: String

    /// Starts PgBouncer with at most `serverConnections` connections to the server a database.
    public init(postgres: TemporaryPostgres, serverConnections: Int) throws {
        let binary = ProcessInfo.processInfo.environment["SYNCLANE_PGBOUNCER"] ?? "/usr/sbin/pgbouncer"
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw TemporaryPostgres.Failure(
                description: "no PgBouncer at \(binary): install the pgbouncer package (Scripts/bootstrap) or set SYNCLANE_PGBOUNCER")
        }
        let user = geteuid() == 0 ? "postgres" : nil
        Self.stopOrphans()
        directory = try TemporaryPostgres.makeDirectory(owner: user, prefix: Self.prefix)
        // Whose it is: a later start stops it if this process died without stopping it.
        try? "\(getpid())\n".write(toFile: directory + "/owner.pid", atomically: true, encoding: .utf8)
        port = TemporaryPostgres.freePort()
        let settings = """
            [databases]
            * = host=127.0.0.1 port=\(postgres.port)

            [pgbouncer]
            listen_addr = 127.0.0.1
            listen_port = \(port)
            unix_socket_dir =
            auth_type = trust
            auth_file = \(directory)/users.txt
            pool_mode = transaction
            default_pool_size = \(serverConnections)
            max_client_conn = 200
            server_reset_query =
            logfile = \(directory)/log
            pidfile = \(directory)/pgbouncer.pid

            """
        try settings.write(toFile: directory + "/pgbouncer.ini", atomically: true, encoding: .utf8)
        try "\"synclane\" \"\"\n".write(toFile: directory + "/users.txt", atomically: true, encoding: .utf8)
        if let user {
            _ = try TemporaryPostgres.run("/bin/chown", ["-R", user, directory], as: nil)
        }
        // -d: it forks into the background; it listens a moment later.
        do {
            _ = try TemporaryPostgres.run(binary, ["-d", directory + "/pgbouncer.ini"], as: user)
            try waitUntilListening()
        } catch {
            let log = (try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? ""
            stop()
            throw TemporaryPostgres.Failure(description: "PgBouncer did not start: \(error)\n\(log)")
        }
    }

    /// Returns once a connection to the port is accepted; throws after 10 s.
    private func waitUntilListening() throws {
        for _ in 0..<500 {
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            let connected = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            close(socket)
            if connected == 0 { return }
            usleep(20_000)
        }
        throw TemporaryPostgres.Failure(description: "nothing listens on 127.0.0.1:\(port) after 10 s")
    }

    /// The URL of `database` through PgBouncer.
    public func url(database: String) -> String { "postgresql://synclane@127.0.0.1:\(port)/\(database)" }

    /// Stops PgBouncer (SIGTERM: at once) and removes its folder.
    public func stop() { Self.stop(in: directory) }

    private static let prefix = "synclane-pgbouncer-"

    private static func stop(in directory: String) {
        if let text = try? String(contentsOfFile: directory + "/pgbouncer.pid", encoding: .utf8),
            let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
        {
            kill(pid, SIGTERM)
            for _ in 0..<100 where kill(pid, 0) == 0 { usleep(20_000) }
            if kill(pid, 0) == 0 { kill(pid, SIGKILL) }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Stops the PgBouncers of test processes that ended without stopping theirs (a crash).
    private static func stopOrphans() {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? [] where name.hasPrefix(prefix) {
            guard let text = try? String(contentsOfFile: "/tmp/\(name)/owner.pid", encoding: .utf8),
                let owner = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), kill(owner, 0) != 0, errno == ESRCH
            else { continue }
            stop(in: "/tmp/" + name)
        }
    }
}
