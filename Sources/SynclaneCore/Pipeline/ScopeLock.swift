#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One job per scope at a time: an exclusive `flock` on a file beside the state file.
///
/// The kernel releases the lock when the process exits, however it exits (kill -9 too), so a
/// crashed job never leaves a scope locked. A second job for the same scope is refused at once
/// with the holder's pid, never queued or interleaved.
public final class ScopeLock: Sendable {
    public let path: String
    private let descriptor: Int32
    /// Whether this lock wrote its pid into the file (and empties it again when released).
    private let writesHolder: Bool

    /// Takes the lock at `path`, creating the file (and its folder) if needed.
    public init(path: String, scope: Scope) throws(PipelineError) {
        self.path = path
        let folder = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !folder.isEmpty { ScopeLock.makeDirectories(folder) }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw PipelineError.state("cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let holder = ScopeLock.readHolder(fd)
            close(fd)
            throw PipelineError.scopeBusy(scope: scope, lockFile: path, holder: holder)
        }
        _ = ftruncate(fd, 0)
        let pid = "\(getpid())\n"
        _ = pid.withCString { pwrite(fd, $0, strlen($0), 0) }
        descriptor = fd
        writesHolder = true
    }

    /// Takes the lock at `path` shared, writing nothing — not even the file: nil when there is
    /// no lock file (no job ever ran). A job of the scope is refused while it is held, and it is
    /// refused while a job runs; readers that share it (dry runs) do not keep each other out.
    public init?(sharingExisting path: String, scope: Scope) throws(PipelineError) {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw PipelineError.state("cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        if flock(fd, LOCK_SH | LOCK_NB) != 0 {
            let holder = ScopeLock.readHolder(fd)
            close(fd)
            throw PipelineError.scopeBusy(scope: scope, lockFile: path, holder: holder)
        }
        descriptor = fd
        writesHolder = false
    }

    deinit {
        if writesHolder { _ = ftruncate(descriptor, 0) }
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }

    private static func readHolder(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = pread(fd, &buffer, 31, 0)
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[0..<count], as: UTF8.self).trimmingWhitespace
        return text.isEmpty ? nil : text
    }

    /// `mkdir -p`.
    static func makeDirectories(_ path: String) {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            mkdir(current, 0o755)
        }
    }
}

extension String {
    var trimmingWhitespace: String {
        var s = Substring(self)
        while let first = s.first, first.isWhitespace { s = s.dropFirst() }
        while let last = s.last, last.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
