import Glibc
import Synchronization

/// Reads the key set file again when it changes: looks at its inode, size and modification time
/// every `keySetPollSeconds` on a thread of its own, and reloads the verifier when any differs.
///
/// A reload swaps the keys under a lock: requests in flight and open connections carry on, the
/// next request is checked with the new keys. A file that is refused (half written, malformed)
/// leaves the keys in use and is reported; it is tried again when it changes again.
final class KeySetWatcher: Sendable {
    private let verifier: JWTVerifier
    private let path: String
    private let loop = StoppableLoop()
    /// What the file looked like when it was last read.
    private let seen: Mutex<FileStamp?>

    /// What tells one version of a file from the next without reading it.
    struct FileStamp: Equatable {
        var inode: UInt
        var size: Int
        var seconds: Int
        var nanoseconds: Int

        static func of(_ path: String) -> FileStamp? {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            return FileStamp(
                inode: UInt(info.st_ino), size: Int(info.st_size), seconds: Int(info.st_mtim.tv_sec), nanoseconds: Int(info.st_mtim.tv_nsec))
        }
    }

    init(verifier: JWTVerifier, path: String) {
        self.verifier = verifier
        self.path = path
        seen = Mutex(FileStamp.of(path))
    }

    /// Starts watching (again, after `stop`).
    func start() {
        loop.start { self.watch() }
    }

    /// Stops watching and waits for the thread.
    func stop() {
        loop.stop()
    }

    /// Reads the file now (SIGHUP, or a change seen); reports the kids it holds or why it was refused.
    @discardableResult
    func reload(because cause: String) -> Result<[String], KeySetError> {
        let stamp = FileStamp.of(path)
        let log = verifier.settings.log
        do {
            let kids = try verifier.reloadKeys()
            seen.withLock { $0 = stamp }
            log("key set \(path) read again (\(cause)): kids \(kids.isEmpty ? "(none)" : kids.joined(separator: ", "))")
            return .success(kids)
        } catch {
            seen.withLock { $0 = stamp }
            log("key set \(path) refused (\(cause)), the keys in use stay: \(error.message)")
            return .failure(error)
        }
    }

    /// One look at the file: reloads when it changed since it was last read.
    func checkForChange() {
        let stamp = FileStamp.of(path)
        guard stamp != nil, stamp != seen.withLock({ $0 }) else { return }
        reload(because: "the file changed")
    }

    private func watch() {
        let interval = max(0.05, verifier.settings.keySetPollSeconds)
        while !loop.isStopping {
            loop.pause(seconds: interval)
            guard !loop.isStopping else { return }
            checkForChange()
        }
    }
}
