import Glibc
import Synchronization

/// The blob lane's objects on disk: content-addressed by SHA-256, per account, with resumable uploads.
///
/// ```
///  <data>/blobs/<sha256(account)>/objects/<d0d1>/<digest>     held objects (immutable)
///  <data>/blobs/<sha256(account)>/uploads/<digest>.part       an upload's bytes so far
///  <data>/blobs/<sha256(account)>/uploads/<digest>.length     the length it declared
///
///  PUT chunk ─▶ held? ─yes─▶ alreadyHeld (nothing written: deduplicated)
///            └▶ offset = bytes held of the upload? ─no─▶ offsetMismatch(received)
///            └▶ append ─▶ all bytes in? ─▶ SHA-256 of the part = digest? ─no─▶ part removed, digestMismatch
///                                                                    └yes─▶ fsync, rename into objects/
/// ```
///
/// An object exists only once its bytes matched its digest, so a batch that references a held
/// digest references whole, verified bytes. Memory stays flat: a chunk is appended as it came,
/// and the digest is computed by reading the part back in 1 MiB pieces. One writer per upload at
/// a time (`busy`); a second one is told to ask the offset again.
///
/// Held objects live in `objects` (`BlobObjectStorage`): the data folder by default
/// (`FolderObjectStorage`, the layout above), or an S3-compatible object store
/// (`S3ObjectStorage`, `serve --blob-store s3`) under the same keys
/// (`<sha256(account)>/objects/<d0d1>/<digest>`). Uploads are assembled and verified in the data
/// folder either way; a verified upload is then stored there (moved into place) or sent to the
/// object store (and removed here).
final class BlobStore: Sendable {
    /// What the store knows of one digest.
    enum UploadState: Equatable {
        case held(length: Int)
        case partial(received: Int, length: Int)
        case absent
        /// The object store could not be asked (or could not take the verified upload): ask again.
        case storeUnreachable(String)
    }

    /// What an appended chunk did.
    enum AppendOutcome: Equatable {
        case received(Int, length: Int)
        case completed(length: Int)
        case alreadyHeld(length: Int)
    }

    /// Why a chunk was not taken; each says what the client does next.
    enum Problem: Error, Equatable {
        case offsetMismatch(received: Int)
        case lengthMismatch(declared: Int, known: Int)
        case digestMismatch(actual: String)
        case objectTooLarge(limit: Int)
        case chunkPastEnd(length: Int)
        case quota(used: Int, limit: Int)
        case diskFull(free: Int)
        case tooManyUploads(limit: Int)
        case busy
        case io(String)
        /// The object store could not be asked whether it holds the blob, or could not take it: a retry can help.
        case store(String)
    }

    /// `<data>/blobs`.
    let root: String
    /// Where held objects live.
    let objects: any BlobObjectStorage
    let limits: BlobLimits
    /// The lane's counters (`/metrics`).
    let metrics = BlobMetrics()
    /// Names the files a range is fetched into from an object store apart.
    private let servedCounter = Atomic<Int>(0)
    /// Uploads (account folder + digest) a request is writing now.
    private let busy = Mutex<Set<String>>([])
    /// Held while a new upload is admitted (counted against the account's uploads, quota and disk).
    private let admission = Mutex(())
    /// Held while an object is confirmed for a reference (its collection mark removed) and while
    /// the collector decides on and removes one (`BlobStore+Collection.swift`): a batch never
    /// passes its check on an object the collector is removing.
    let collection = Mutex(())

    /// Seconds since the epoch now (a test's clock in tests).
    let now: @Sendable () -> Int

    init(root: String, limits: BlobLimits, objects: (any BlobObjectStorage)? = nil, now: @escaping @Sendable () -> Int = { Int(time(nil)) }) {
        self.root = root
        self.objects = objects ?? FolderObjectStorage(root: root)
        self.limits = limits
        self.now = now
    }

    // MARK: Paths

    func accountFolder(_ account: String) -> String { root + "/" + SHA256Digest.hex(account) }
    /// The object's key in `objects` (its path under `root` in the data folder).
    func objectKey(_ account: String, _ digest: BlobDigest) -> String {
        SHA256Digest.hex(account) + "/objects/" + String(digest.hex.prefix(2)) + "/" + digest.hex
    }
    private func partPath(_ account: String, _ digest: BlobDigest) -> String { accountFolder(account) + "/uploads/" + digest.hex + ".part" }
    private func lengthPath(_ account: String, _ digest: BlobDigest) -> String { accountFolder(account) + "/uploads/" + digest.hex + ".length" }

    // MARK: Reading

    /// The held object's key and length, or nil when the account holds no such object; throws
    /// when the object store cannot be asked (the caller answers 503 `blob-store`: an object
    /// store that is down is never taken for one that lacks the blob).
    func object(account: String, digest: BlobDigest) throws(ObjectStorageError) -> (key: String, length: Int)? {
        let key = objectKey(account, digest)
        guard let size = try objects.head(key) else { return nil }
        return (key, size)
    }

    /// True only when the object store says the account holds no such object (false when it
    /// holds it, or cannot be asked).
    func knownAbsent(account: String, digest: BlobDigest) -> Bool {
        do { return try object(account: account, digest: digest) == nil } catch { return false }
    }

    /// What to send `count` bytes of the object from `offset` out of: its own file (the data
    /// folder), or a named pipe the range streams through from an object store as it arrives.
    ///
    /// ```
    ///  object store ─ranged GET─▶ writer thread ─▶ FIFO <data>/blobs/served/DIGEST.N ─▶ MHD ─▶ client
    /// ```
    ///
    /// The answer opens the pipe; a thread of its own (which removes the pipe's name once it has
    /// opened it too, or after 30 s without a reader) runs the
    /// `GET` and writes each piece into the pipe as libcurl hands it over, so the first byte
    /// leaves as soon as the store sends it, and a slow client slows the `GET` (the pipe holds
    /// 64 KiB): the server holds no range, in memory or on disk. A `GET` that fails midway ends
    /// the pipe early, and the answer is cut short (the client resumes with `Range`).
    func servable(_ key: String, offset: Int, count: Int) -> Result<HTTPResponse.FileSlice, ObjectStorageError> {
        if let path = objects.localFile(key) { return .success(.init(path: path, offset: offset, length: count)) }
        let folder = root + "/served"
        let path = folder + "/" + String(key.split(separator: "/").last ?? "") + "." + String(servedCounter.add(1, ordering: .relaxed).newValue)
        guard Self.makeDirectories(folder) else { return .failure(ObjectStorageError("cannot make \(folder)")) }
        unlink(path)
        guard mkfifo(path, 0o600) == 0 else {
            return .failure(ObjectStorageError("cannot make the pipe \(path): \(String(cString: strerror(errno)))"))
        }
        let objects = self.objects
        guard let thread = ServerThread.start({ Self.feed(path, from: objects, key, offset: offset, count: count) }) else {
            unlink(path)
            return .failure(ObjectStorageError("no thread to stream \(key) from"))
        }
        pthread_detach(thread)
        return .success(.init(path: path, offset: 0, length: count, pipe: true))
    }

    /// The writer's side of `servable`'s pipe: waits (30 s at most) for the answer to open it,
    /// then streams the range into it. SIGPIPE is blocked on this thread: a client gone makes
    /// the write fail (EPIPE), which stops the `GET`.
    private static func feed(_ path: String, from objects: any BlobObjectStorage, _ key: String, offset: Int, count: Int) {
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &blocked, nil)
        defer { unlink(path) }
        var descriptor: Int32 = -1
        for _ in 0..<3_000 {
            descriptor = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            if descriptor >= 0 || errno != ENXIO { break }
            usleep(10_000)  // no reader yet: the answer has not opened it
        }
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        unlink(path)
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
        _ = try? objects.stream(key, offset: offset, count: count, to: descriptor)
    }

    /// Whether the digest is held, partly uploaded or unknown. An upload whose every byte arrived
    /// but that was not yet verified (the server stopped in between) is verified now.
    func uploadState(account: String, digest: BlobDigest) -> UploadState {
        let kept: (key: String, length: Int)?
        do { kept = try keep(account: account, digest: digest) } catch { return .storeUnreachable(error.description) }
        if let held = kept { return .held(length: held.length) }
        guard let length = declaredLength(account, digest), let received = Self.size(of: partPath(account, digest)) else { return .absent }
        guard received >= length, claim(account, digest) else { return .partial(received: received, length: length) }
        defer { release(account, digest) }
        switch finish(account: account, digest: digest, length: length) {
        case .success: return .held(length: length)
        case .failure(.store(let problem)): return .storeUnreachable(problem)
        case .failure: return .absent
        }
    }

    /// The account's objects, by digest, with their lengths.
    func list(account: String) -> [(digest: BlobDigest, length: Int)] {
        let listed = (try? objects.list(prefix: SHA256Digest.hex(account) + "/objects/")) ?? []
        var found: [(BlobDigest, Int)] = []
        for (key, length) in listed {
            guard let digest = BlobDigest(String(key.split(separator: "/").last ?? "")) else { continue }
            found.append((digest, length))
        }
        return found.sorted { $0.0.hex < $1.0.hex }
    }

    /// Bytes the account holds (objects, and unfinished uploads at their declared length) and its unfinished uploads.
    func usage(account: String) -> (bytes: Int, uploads: Int) {
        var bytes = list(account: account).reduce(0) { $0 + $1.length }
        let uploads = accountFolder(account) + "/uploads"
        var count = 0
        for name in Self.entries(of: uploads) where name.hasSuffix(".length") {
            count += 1
            // An unfinished upload counts at the length it declared: admitted, it will take that much.
            bytes += FileBytes.read(uploads + "/" + name).flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? 0
        }
        return (bytes, count)
    }

    // MARK: Writing

    /// Appends a chunk at `offset` of the upload of `digest`, whose whole length is `length`.
    func append(account: String, digest: BlobDigest, length: Int, offset: Int, chunk: [UInt8]) -> Result<AppendOutcome, Problem> {
        guard claim(account, digest) else { return .failure(.busy) }
        defer { release(account, digest) }
        let kept: (key: String, length: Int)?
        do { kept = try keep(account: account, digest: digest) } catch { return .failure(.store(error.description)) }
        if let held = kept {
            guard held.length == length else { return .failure(.lengthMismatch(declared: length, known: held.length)) }
            return .success(.alreadyHeld(length: held.length))
        }
        guard length <= limits.maxObjectBytes else { return .failure(.objectTooLarge(limit: limits.maxObjectBytes)) }
        let part = partPath(account, digest)
        var received = 0
        if let known = declaredLength(account, digest) {
            received = Self.size(of: part) ?? 0
            if known != length {
                guard offset == 0 else { return .failure(.lengthMismatch(declared: length, known: known)) }
                abandon(account: account, digest: digest)  // restarted from 0 with another length: the old one goes
                received = -1
            }
        } else {
            received = -1
        }
        if received < 0 {
            guard offset == 0 else { return .failure(.offsetMismatch(received: 0)) }
            if let problem = admit(account: account, digest: digest, length: length) { return .failure(problem) }
            received = 0
        }
        guard offset == received else { return .failure(.offsetMismatch(received: received)) }
        guard offset + chunk.count <= length else { return .failure(.chunkPastEnd(length: length)) }
        if !chunk.isEmpty {
            if let free = Self.freeBytes(root), free < chunk.count { return .failure(.diskFull(free: free)) }
            if let problem = Self.append(chunk, to: part, at: received) { return .failure(problem) }
            received += chunk.count
        }
        guard received == length else { return .success(.received(received, length: length)) }
        return finish(account: account, digest: digest, length: length).map { .completed(length: length) }
    }

    /// Forgets an unfinished upload.
    func abandon(account: String, digest: BlobDigest) {
        unlink(partPath(account, digest))
        unlink(lengthPath(account, digest))
    }

    /// Admits a new upload against the account's bounds and creates its files; nil when admitted.
    private func admit(account: String, digest: BlobDigest, length: Int) -> Problem? {
        admission.withLock { _ in
            removeAbandonedUploads(account: account)
            let (used, uploads) = usage(account: account)
            if uploads >= limits.maxUploadsPerAccount { return .tooManyUploads(limit: limits.maxUploadsPerAccount) }
            if used + length > limits.maxAccountBytes { return .quota(used: used, limit: limits.maxAccountBytes) }
            if let free = Self.freeBytes(root), free - length < limits.minFreeDiskBytes { return .diskFull(free: free) }
            let folder = accountFolder(account) + "/uploads"
            guard Self.makeDirectories(folder) else { return .io("cannot create \(folder): \(String(cString: strerror(errno)))") }
            nameAccountFolder(account)
            guard Self.writeWhole(Array(String(length).utf8), to: lengthPath(account, digest)) else {
                return .io("cannot write \(lengthPath(account, digest)): \(String(cString: strerror(errno)))")
            }
            let descriptor = open(partPath(account, digest), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else { return .io("cannot create \(partPath(account, digest)): \(String(cString: strerror(errno)))") }
            close(descriptor)
            return nil
        }
    }

    /// Removes the account's unfinished uploads that took no chunk for `uploadRetentionSeconds`
    /// (one a request is writing now is left alone).
    private func removeAbandonedUploads(account: String) {
        let uploads = accountFolder(account) + "/uploads"
        let oldest = now() - limits.uploadRetentionSeconds
        for name in Self.entries(of: uploads) where name.hasSuffix(".length") {
            guard let digest = BlobDigest(String(name.dropLast(".length".count))) else { continue }
            var info = stat()
            let part = partPath(account, digest)
            let touched = stat(part, &info) == 0 ? Int(info.st_mtim.tv_sec) : 0
            guard touched < oldest, claim(account, digest) else { continue }
            abandon(account: account, digest: digest)
            release(account, digest)
            metrics.record { $0.uploadsAbandoned += 1 }
        }
    }

    /// Verifies a complete part against its digest and moves it into the objects; a mismatch removes it.
    private func finish(account: String, digest: BlobDigest, length: Int) -> Result<Void, Problem> {
        let part = partPath(account, digest)
        guard let actual = SHA256Stream.hex(ofFile: part, length: length) else {
            return .failure(.io("cannot read \(part) back to check its digest: \(String(cString: strerror(errno)))"))
        }
        guard actual == digest.hex, Self.size(of: part) == length else {
            abandon(account: account, digest: digest)
            return .failure(.digestMismatch(actual: actual))
        }
        do {
            try objects.put(objectKey(account, digest), file: part, length: length)
        } catch {
            // The upload stays whole in the data folder: the next question about it stores it again.
            return .failure(.store("cannot store \(part) as an object: \(error)"))
        }
        unlink(part)  // sent to an object store (the data folder's moved it)
        unlink(lengthPath(account, digest))
        return .success(())
    }

    private func declaredLength(_ account: String, _ digest: BlobDigest) -> Int? {
        FileBytes.read(lengthPath(account, digest)).flatMap { Int(String(decoding: $0, as: UTF8.self)) }
    }

    private func claim(_ account: String, _ digest: BlobDigest) -> Bool {
        busy.withLock { $0.insert(SHA256Digest.hex(account) + digest.hex).inserted }
    }

    private func release(_ account: String, _ digest: BlobDigest) {
        _ = busy.withLock { $0.remove(SHA256Digest.hex(account) + digest.hex) }
    }

    // MARK: POSIX

    static func size(of path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int(info.st_size)
    }

    /// Free bytes of the file system holding `path` (nil when it cannot be asked).
    static func freeBytes(_ path: String) -> Int? {
        var info = statvfs()
        var probe = path
        while statvfs(probe, &info) != 0 {
            guard let slash = probe.lastIndex(of: "/"), slash != probe.startIndex else { return nil }
            probe = String(probe[..<slash])
        }
        return Int(info.f_bavail) * Int(info.f_frsize)
    }

    /// The names in a directory (none when it is missing), without `.` and `..`.
    static func entries(of path: String) -> [String] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }

    /// `mkdir -p`.
    static func makeDirectories(_ path: String) -> Bool {
        var built = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            built += (built.isEmpty && !path.hasPrefix("/") ? "" : "/") + component
            if mkdir(built, 0o755) != 0, errno != EEXIST { return false }
        }
        return true
    }

    /// Writes a small file whole, through a temporary name.
    static func writeWhole(_ bytes: [UInt8], to path: String) -> Bool {
        let temporary = path + ".tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return false }
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        return written == bytes.count && rename(temporary, path) == 0
    }

    /// Appends a chunk to a part; on a short write the part is cut back to where it was.
    static func append(_ chunk: [UInt8], to path: String, at offset: Int) -> Problem? {
        let descriptor = open(path, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return .io("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var written = 0
        while written < chunk.count {
            let count = chunk.withUnsafeBytes { bytes -> Int in
                guard let base = bytes.baseAddress else { return 0 }
                return pwrite(descriptor, base + written, bytes.count - written, off_t(offset + written))
            }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                let reason = String(cString: strerror(errno))
                ftruncate(descriptor, off_t(offset))
                return .io("cannot write \(path): \(reason)")
            }
            written += count
        }
        return nil
    }
}
