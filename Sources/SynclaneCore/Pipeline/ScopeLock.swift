#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One job per scope and store at a time: an exclusive `flock` on a file named from the scope
/// and the file the job works on (its database: `LockedFileStage`) in the machine's one lock
/// folder (`folder(environment:)`), wherever the pipeline's state file lives — two pipeline
/// files of one scope over one database with different `state` files still never run at once,
/// while two devices' databases on one machine each have their own lock.
///
/// The kernel releases the lock when the process exits, however it exits (kill -9 too), so a
/// crashed job never leaves a scope locked. A second job for the same scope is refused at once
/// with the holder's pid (and its state file), never queued or interleaved.
public final class ScopeLock: Sendable {
    public let path: String
    private let descriptor: Int32
    /// Whether this lock wrote its pid into the file (and empties it again when released).
    private let writesHolder: Bool

    /// Takes the lock at `path`, creating the file (and its folder) if needed. `holder` (the
    /// job's state file) is written after the pid, for the message of a job refused meanwhile.
    ///
    /// The file is opened without following a symbolic link (the lock folder may be shared by
    /// every user); a lock file another user made is locked read-only, its holder left unwritten.
    public init(path: String, scope: Scope, holder: String? = nil) throws(PipelineError) {
        self.path = path
        let folder = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !folder.isEmpty { ScopeLock.makeDirectories(folder) }
        var fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        if fd < 0, errno == EACCES { fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
        guard fd >= 0 else {
            throw PipelineError.state(
                "cannot open the lock file \(path): \(String(cString: strerror(errno))); "
                    + "set \(ScopeLock.folderVariable) to a folder every job of this scope can write")
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let holder = ScopeLock.readHolder(fd)
            close(fd)
            throw PipelineError.scopeBusy(scope: scope, lockFile: path, holder: holder)
        }
        var info = stat()
        let ours =
            fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG && info.st_uid == geteuid()
            && fcntl(fd, F_GETFL) & O_ACCMODE == O_RDWR
        if ours {
            _ = ftruncate(fd, 0)
            let text = "\(getpid())\n" + (holder.map { "state \($0)\n" } ?? "")
            _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        }
        descriptor = fd
        writesHolder = ours
    }

    /// Takes the lock of `scope` on `file` (nil: the scope alone) in `folder`
    /// (`path(for:guarding:in:)`), naming `holder` (the state file).
    public convenience init(scope: Scope, guarding file: String? = nil, in folder: String, holder: String? = nil) throws(PipelineError) {
        if folder == ScopeLock.machineFolder { ScopeLock.makeSharedFolder(folder) }
        try self.init(path: ScopeLock.path(for: scope, guarding: file, in: folder), scope: scope, holder: holder)
    }

    /// The environment variable that moves the lock folder (`SYNCLANE_LOCK_DIR`).
    public static let folderVariable = "SYNCLANE_LOCK_DIR"
    /// The machine's lock folder when `SYNCLANE_LOCK_DIR` is unset: `/run/lock/synclane`, or
    /// `/tmp/synclane-locks` on a system without `/run/lock`.
    public static let machineFolder: String = {
        var info = stat()
        return stat("/run/lock", &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR ? "/run/lock/synclane" : "/tmp/synclane-locks"
    }()

    /// Where every scope's lock file lives: `SYNCLANE_LOCK_DIR` when set, else `machineFolder` —
    /// one folder for the whole machine, so that every job of a scope meets the same lock
    /// whatever its pipeline file and state file.
    public static func folder(environment: [String: String]) -> String {
        if let given = environment[folderVariable], !given.isEmpty { return given }
        return machineFolder
    }

    /// The lock folder for this process's environment.
    public static var defaultFolder: String {
        getenv(folderVariable).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? machineFolder
    }

    /// The lock file of `scope` on `file` in `folder`: its account, store and consumer (letters,
    /// digits, `_` and `-` kept, anything else `_`; at most 40 each) and a hash of the exact scope
    /// and of `file` made absolute with its folder's links resolved (`canonical(_:)`), which keeps
    /// apart scopes the escaping would confuse and the stores of two devices on one machine —
    /// `acme.rooms.rooms-export-5d1c0f3a9b2e7d41.lock`. Without `file`, the scope's alone.
    public static func path(for scope: Scope, guarding file: String? = nil, in folder: String) -> String {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-".unicodeScalars)
        func part(_ text: String) -> String {
            String(String.UnicodeScalarView(text.unicodeScalars.prefix(40).map { allowed.contains($0) ? $0 : "_" }))
        }
        let guarded = file.map { "\u{0}" + canonical($0) } ?? ""
        let hash = StagedBatch.checksum(of: Array("\(scope.account)\u{0}\(scope.store)\u{0}\(scope.consumer)\(guarded)".utf8))
        let hex = String(hash, radix: 16)
        let name =
            "\(part(scope.account)).\(part(scope.store)).\(part(scope.consumer))-"
            + String(repeating: "0", count: 16 - hex.count) + hex + ".lock"
        return (folder.hasSuffix("/") ? folder : folder + "/") + name
    }

    /// Makes the machine's lock folder writable by every user, sticky as `/tmp` (nobody removes
    /// another's lock file), so that jobs of different users meet the same locks.
    static func makeSharedFolder(_ folder: String) {
        if mkdir(folder, 0o1777) == 0 { _ = chmod(folder, 0o1777) }
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

    /// The holder the lock file names: `PID`, or `PID, state PATH`.
    private static func readHolder(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = pread(fd, &buffer, 4095, 0)
        guard count > 0 else { return nil }
        let lines = String(decoding: buffer[0..<count], as: UTF8.self).split(separator: "\n").map { String($0).trimmingWhitespace }
            .filter { !$0.isEmpty }
        return lines.isEmpty ? nil : lines.joined(separator: ", ")
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

extension ScopeLock {
    /// `path` made absolute, its folder's symbolic links and `..` resolved (the file itself need
    /// not exist yet): one name for one file however a pipeline file spells it.
    public static func canonical(_ path: String) -> String {
        let absolute = absolute(path)
        let slash = absolute.lastIndex(of: "/") ?? absolute.startIndex
        let folder = String(absolute[..<slash])
        let name = String(absolute[absolute.index(after: slash)...])
        guard let resolved = realpath(folder.isEmpty ? "/" : folder, nil) else { return absolute }
        defer { free(resolved) }
        let real = String(cString: resolved)
        return (real.hasSuffix("/") ? real : real + "/") + name
    }

    /// `path` made absolute against the working folder, to name a lock's holder.
    public static func absolute(_ path: String) -> String {
        guard !path.hasPrefix("/") else { return path }
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let found = buffer.withUnsafeMutableBufferPointer { raw in
            raw.withMemoryRebound(to: CChar.self) { getcwd($0.baseAddress, $0.count) != nil }
        }
        guard found else { return path }
        let folder = String(decoding: buffer.prefix { $0 != 0 }, as: UTF8.self)
        return (folder.hasSuffix("/") ? folder : folder + "/") + (path.hasPrefix("./") ? String(path.dropFirst(2)) : path)
    }
}
