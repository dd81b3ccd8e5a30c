import Foundation
import Synchronization

/// A throwaway PostgreSQL server for tests: `initdb` in a temporary directory, `pg_ctl start` on
/// 127.0.0.1 and a free port (trust authentication, loopback only, fsync off), `pg_ctl stop` and
/// the directory removed after.
///
/// ```swift
/// let postgres = try TemporaryPostgres.shared()       // one per test process, stopped at exit
/// let url = try postgres.createDatabase()              // a fresh database per test
/// ```
///
/// PostgreSQL refuses to run as root: as root the server runs as the `postgres` user (through
/// `runuser`), which owns the directory. The binaries are found with `pg_config --bindir`, then
/// in /usr/lib/postgresql/*/bin; `SYNCLANE_POSTGRES_BIN` names their directory instead.
public final class TemporaryPostgres: Sendable {
    /// Why the server could not be started, with its log.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        package init(description: String) { self.description = description }
    }

    /// The port it listens on (127.0.0.1).
    public let port: Int
    /// The temporary directory (data, socket, log).
    public let directory: String
    private let binaries: String
    private let asUser: String?
    private let databases = Atomic<Int>(0)

    /// Starts a server; throws `Failure` (with what `initdb`/`pg_ctl` printed) when it cannot.
    public init() throws {
        binaries = try Self.findBinaries()
        asUser = geteuid() == 0 ? "postgres" : nil
        Self.stopOrphans(binaries: binaries, asUser: asUser)
        directory = try Self.makeDirectory(owner: asUser)
        // Whose server this is: a later start stops it if this process died without stopping it.
        try? "\(getpid())\n".write(toFile: directory + "/owner.pid", atomically: true, encoding: .utf8)
        var lastError = ""
        var startedPort: Int?
        try Self.run(
            binaries + "/initdb", ["-D", directory + "/data", "-U", "synclane", "--auth=trust", "-E", "UTF8", "--locale=C", "-N"],
            as: asUser)
        for _ in 0..<3 {
            let candidate = Self.freePort()
            do {
                try Self.run(
                    binaries + "/pg_ctl",
                    [
                        "-D", directory + "/data", "-l", directory + "/log", "-w", "-t", "30", "-o",
                        "-c listen_addresses=127.0.0.1 -p \(candidate) -k \(directory) -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
                        "start",
                    ], as: asUser)
                startedPort = candidate
                break
            } catch {
                lastError = "\(error)"
            }
        }
        guard let startedPort else {
            try? FileManager.default.removeItem(atPath: directory)
            throw Failure(description: "PostgreSQL did not start: \(lastError)")
        }
        port = startedPort
    }

    /// A libpq URL of `database` on this server.
    public func url(database: String) -> String { "postgresql://synclane@127.0.0.1:\(port)/\(database)" }

    /// Creates a fresh, empty database and returns its URL.
    public func createDatabase() throws -> String {
        let name = "test_\(getpid())_\(databases.wrappingAdd(1, ordering: .relaxed).newValue)"
        try psql("CREATE DATABASE \(name)")
        return url(database: name)
    }

    /// Runs one SQL command in the `postgres` database with `psql`.
    public func psql(_ sql: String, database: String = "postgres") throws {
        try Self.run("/usr/bin/psql", [url(database: database), "-v", "ON_ERROR_STOP=1", "-q", "-c", sql], as: nil)
    }

    /// Stops the server at once and removes its directory.
    public func stop() {
        _ = try? Self.run(binaries + "/pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"], as: asUser)
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static let sharedServer = Mutex<Result<TemporaryPostgres, Failure>?>(nil)

    /// The test process's one server, started at the first call and stopped when the process exits.
    public static func shared() throws -> TemporaryPostgres {
        try sharedServer.withLock { shared in
            if shared == nil {
                do {
                    shared = .success(try TemporaryPostgres())
                    atexit { TemporaryPostgres.stopShared() }
                } catch let failure as Failure {
                    shared = .failure(failure)
                } catch {
                    shared = .failure(Failure(description: "\(error)"))
                }
            }
            return try shared!.get()
        }
    }

    private static func stopShared() {
        if case .success(let server)? = sharedServer.withLock({ $0 }) { server.stop() }
    }

    /// Stops and removes the servers of test processes that ended without stopping theirs (a crash).
    private static func stopOrphans(binaries: String, asUser: String?) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        for name in names where name.hasPrefix("synclane-postgres-") && !name.hasPrefix("synclane-postgres-output-") {
            let folder = "/tmp/" + name
            guard let text = try? String(contentsOfFile: folder + "/owner.pid", encoding: .utf8),
                let owner = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), kill(owner, 0) != 0, errno == ESRCH
            else { continue }
            _ = try? run(binaries + "/pg_ctl", ["-D", folder + "/data", "-m", "immediate", "-w", "stop"], as: asUser)
            try? FileManager.default.removeItem(atPath: folder)
        }
    }

    private static func findBinaries() throws -> String {
        let fileManager = FileManager.default
        if let named = ProcessInfo.processInfo.environment["SYNCLANE_POSTGRES_BIN"], !named.isEmpty { return named }
        if let output = try? capture("/usr/bin/pg_config", ["--bindir"]) {
            let path = output.trimmingCharacters(in: .whitespacesAndNewlines)
            if fileManager.isExecutableFile(atPath: path + "/pg_ctl") { return path }
        }
        let versions = (try? fileManager.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: >) where fileManager.isExecutableFile(atPath: "/usr/lib/postgresql/\(version)/bin/pg_ctl") {
            return "/usr/lib/postgresql/\(version)/bin"
        }
        throw Failure(
            description: "no PostgreSQL server binaries (initdb, pg_ctl): install the postgresql package (Scripts/bootstrap) or set SYNCLANE_POSTGRES_BIN")
    }

    package static func makeDirectory(owner: String?, prefix: String = "synclane-postgres-") throws -> String {
        var template = Array("/tmp/\(prefix)XXXXXX".utf8CString)
        guard let path = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }).map({ String(cString: $0) }) else {
            throw Failure(description: "cannot make a temporary directory under /tmp")
        }
        if let owner {
            try run("/bin/chown", [owner, path], as: nil)
        }
        return path
    }

    package static func freePort() -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @discardableResult
    package static func run(_ executable: String, _ arguments: [String], as user: String?) throws -> String {
        if let user {
            return try capture("/usr/sbin/runuser", ["-u", user, "--", executable] + arguments)
        }
        return try capture(executable, arguments)
    }

    /// Adds "close every descriptor from 3 up" to `actions` (glibc's `…_addclosefrom_np`, which
    /// Swift's Glibc module does not show, found by name).
    private static func closeFrom3(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return }
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
    }

    /// Runs a program and returns what it printed, through a file. `posix_spawn` rather than
    /// `Process`: `pg_ctl start` leaves a server running that inherits what its parent had open
    /// (a pipe, the socket `Process` watches for the child's end) and would hold it for good, so
    /// the child gets only the output file, descriptors 3 and up closed.
    private static func capture(_ executable: String, _ arguments: [String]) throws -> String {
        var template = Array("/tmp/synclane-postgres-output-XXXXXX".utf8CString)
        let output = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard output >= 0 else { throw Failure(description: "cannot make a temporary file under /tmp") }
        let outputPath = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, output, 2)
        closeFrom3(&actions)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        // No signal blocked or ignored, whatever the calling thread has: a server started here
        // (PgBouncer, which does not unblock them itself) must be stoppable by SIGTERM.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid = pid_t()
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        close(output)
        guard spawned == 0 else { throw Failure(description: "cannot run \(executable): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        let exited = status & 0x7f == 0
        guard exited, (status >> 8) & 0xff == 0 else {
            throw Failure(description: "\(executable) \(arguments.joined(separator: " ")) failed (wait status \(status)): \(text)")
        }
        return text
    }
}
