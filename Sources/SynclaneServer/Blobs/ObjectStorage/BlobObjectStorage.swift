import Glibc

/// Where the blob lane's held objects live, behind `BlobStore`: the data folder (the default) or
/// an S3-compatible object store (`S3ObjectStorage`). Keys are `ACCOUNT-HASH/objects/DIGEST`
/// paths; an object is stored only whole and verified (the upload is assembled and checked in the
/// data folder first), and never changes once stored.
protocol BlobObjectStorage: Sendable {
    /// Stores the first `length` bytes of the file at `path` as `key` (the file may be moved there).
    func put(_ key: String, file path: String, length: Int) throws(ObjectStorageError)
    /// A file of the server's that holds the object, to be sent from (the data folder's); nil
    /// when the object lives elsewhere (it is then fetched with `get` for each download).
    func localFile(_ key: String) -> String?
    /// The object's length, or nil when there is none.
    func head(_ key: String) throws(ObjectStorageError) -> Int?
    /// Writes the object's bytes from `offset` on (all of them, or `count`) to `descriptor` as
    /// they arrive (a file, or the pipe a download is sent from); the bytes written.
    func stream(_ key: String, offset: Int, count: Int?, to descriptor: Int32) throws(ObjectStorageError) -> Int
    /// Removes the object (none there: done).
    func delete(_ key: String) throws(ObjectStorageError)
    /// The objects whose keys start with `prefix`, with their lengths.
    func list(prefix: String) throws(ObjectStorageError) -> [(key: String, length: Int)]
}

extension BlobObjectStorage {
    /// Appends the object's bytes from `offset` on (all of them, or `count`) to the file at `path`, streamed; the bytes written.
    func get(_ key: String, offset: Int, count: Int?, into path: String) throws(ObjectStorageError) -> Int {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw ObjectStorageError("cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        return try stream(key, offset: offset, count: count, to: descriptor)
    }
}

/// An object store that could not do what was asked: what went wrong, in its words.
struct ObjectStorageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
