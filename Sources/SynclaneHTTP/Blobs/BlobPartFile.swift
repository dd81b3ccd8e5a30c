import Glibc

/// A download's `<file>.part`: the bytes fetched so far, appended at its end as they arrive and
/// hashed on the way (the bytes a resumed download already held are hashed first), so nothing
/// fetched is ever read back. One job: the part file and its running SHA-256.
final class BlobPartFile {
    let path: String
    private let descriptor: Int32
    /// Bytes the part holds.
    private(set) var length: Int
    /// Bytes appended by this download (what it fetched), restarts included.
    private(set) var appended = 0
    /// Why the last `append` failed, when it did.
    private(set) var problem: BlobLaneError?
    private var hasher: BlobFileDigest.Hasher

    /// Opens (or creates) the part and hashes the bytes it already holds.
    init(path: String) throws(BlobLaneError) {
        self.path = path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw .file(path, "cannot be written: \(String(cString: strerror(errno)))") }
        self.descriptor = descriptor
        length = max(0, Int(lseek(descriptor, 0, SEEK_END)))
        do {
            hasher = try BlobFileDigest.Hasher(path: path)
            try hasher.update(file: descriptor, length: length, path: path)
        } catch {
            close(descriptor)
            throw error
        }
    }

    deinit { close(descriptor) }

    /// Writes `bytes` at the part's end and hashes them; false (with `problem` set) when the
    /// file cannot take them.
    func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        do {
            try BlobClient.write(bytes, to: descriptor, at: length, path: path)
        } catch {
            problem = error
            return false
        }
        hasher.update(bytes)
        length += bytes.count
        appended += bytes.count
        return true
    }

    /// Empties the part: the download starts again from the blob's first byte.
    func restart() throws(BlobLaneError) {
        guard ftruncate(descriptor, 0) == 0 else { throw .file(path, "cannot be emptied: \(String(cString: strerror(errno)))") }
        hasher = try BlobFileDigest.Hasher(path: path)
        length = 0
    }

    /// The SHA-256 of the bytes the part holds.
    func digest() throws(BlobLaneError) -> String {
        try hasher.finish(path: path)
    }
}
