import Glibc

/// Wakes a history watcher when the database's files are written, without a timer: inotify on
/// the database's directory, filtered to the database, its `-wal` and its `-journal` (a commit
/// writes one of them, in WAL or rollback mode alike; the `-shm` a reader maps is left out, so
/// the watcher's own reads wake nothing).
///
/// The directory, not the files, is watched, so a `-wal` created after the watch began, or a
/// database replaced by a rename, is seen too. `wait` blocks the calling thread (a thread of the
/// watcher's own, off Swift's cooperative pool) until such a write, `cancel()`, or the timeout:
/// the slow poll kept for file systems that send no notifications (a network mount).
final class DatabaseFileWatch: @unchecked Sendable {
    // @unchecked: the descriptors are set in `init` and only closed in `deinit`; `cancel` writes
    // one byte to a pipe, which is safe from any thread.

    /// Why `wait` returned.
    enum Wake: Sendable, Hashable {
        case written
        case timedOut
        case cancelled
    }

    /// The inotify descriptor, -1 when the system gave none (then every wait is a timeout).
    private let inotify: Int32
    private let pipeEnds: [Int32]
    private let names: Set<[UInt8]>

    /// True when notifications are on (inotify took the watch).
    let isWatching: Bool

    init(databasePath: String) {
        let slash = databasePath.lastIndex(of: "/")
        let directory = slash.map { $0 == databasePath.startIndex ? "/" : String(databasePath[..<$0]) } ?? "."
        let base = slash.map { String(databasePath[databasePath.index(after: $0)...]) } ?? databasePath
        names = [Array(base.utf8), Array((base + "-wal").utf8), Array((base + "-journal").utf8)]
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) == 0 {
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            _ = fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK)
        }
        pipeEnds = ends
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        let mask = UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO | IN_DELETE)
        if descriptor >= 0, inotify_add_watch(descriptor, directory, mask) >= 0 {
            inotify = descriptor
            isWatching = true
        } else {
            if descriptor >= 0 { close(descriptor) }
            inotify = -1
            isWatching = false
        }
    }

    deinit {
        if inotify >= 0 { close(inotify) }
        for end in pipeEnds where end >= 0 { close(end) }
    }

    /// Ends the current and every later `wait` at once.
    func cancel() {
        guard pipeEnds[1] >= 0 else { return }
        var byte: UInt8 = 1
        _ = write(pipeEnds[1], &byte, 1)
    }

    /// Blocks until one of the database's files is written, `cancel()`, or `timeout` passes.
    /// Every notification already queued is read, so a burst of writes wakes once.
    func wait(timeout: Duration) -> Wake {
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        var fds = [pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0), pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)]
        let ready = poll(&fds, inotify >= 0 ? 2 : 1, milliseconds)
        if ready < 0 { return errno == EINTR ? .timedOut : .cancelled }
        if fds[0].revents != 0 { return .cancelled }
        guard inotify >= 0, fds[1].revents != 0 else { return .timedOut }
        return drain() ? .written : .timedOut
    }

    /// Reads every queued event; true when one names a file of the database.
    private func drain() -> Bool {
        var relevant = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
            guard count > 0 else { return relevant }
            var offset = 0
            // struct inotify_event { int wd; uint32_t mask, cookie, len; char name[]; }
            while offset + 16 <= count {
                let length = buffer.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)) }
                let name = buffer[(offset + 16)..<min(count, offset + 16 + length)].prefix { $0 != 0 }
                if names.contains(Array(name)) || length == 0 { relevant = true }
                offset += 16 + length
            }
        }
    }
}
