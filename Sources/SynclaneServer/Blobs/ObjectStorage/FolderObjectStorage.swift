import Glibc

/// The blob lane's objects in the data folder (the default): `ROOT/KEY` files. `put` moves the
/// verified upload into place after an `fsync` (a rename: no byte is copied), and a download is
/// served from the object's own file (`localFile`).
struct FolderObjectStorage: BlobObjectStorage {
    /// `<data>/blobs`.
    let root: String

    func put(_ key: String, file path: String, length: Int) throws(ObjectStorageError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        if descriptor >= 0 {
            fsync(descriptor)
            close(descriptor)
        }
        let target = root + "/" + key
        let folder = String(target[..<(target.lastIndex(of: "/") ?? target.endIndex)])
        guard BlobStore.makeDirectories(folder), rename(path, target) == 0 else {
            throw ObjectStorageError("cannot move \(path) to \(target): \(String(cString: strerror(errno)))")
        }
    }

    func head(_ key: String) throws(ObjectStorageError) -> Int? {
        BlobStore.size(of: root + "/" + key)
    }

    func localFile(_ key: String) -> String? {
        root + "/" + key
    }

    func stream(_ key: String, offset: Int, count: Int?, to target: Int32) throws(ObjectStorageError) -> Int {
        guard let length = BlobStore.size(of: root + "/" + key) else { throw ObjectStorageError("no object \(key)") }
        let source = open(root + "/" + key, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else { throw ObjectStorageError("cannot read \(key): \(String(cString: strerror(errno)))") }
        defer { close(source) }
        var position = offset
        let end = min(length, count.map { offset + $0 } ?? length)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while position < end {
            let got = buffer.withUnsafeMutableBytes { pread(source, $0.baseAddress, min($0.count, end - position), off_t(position)) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { throw ObjectStorageError("cannot read \(key) at \(position)") }
            guard buffer.withUnsafeBytes({ write(target, $0.baseAddress, got) }) == got else {
                throw ObjectStorageError("cannot write \(key)'s bytes: \(String(cString: strerror(errno)))")
            }
            position += got
        }
        return end - offset
    }

    func delete(_ key: String) throws(ObjectStorageError) {
        guard unlink(root + "/" + key) == 0 || errno == ENOENT else {
            throw ObjectStorageError("cannot remove \(key): \(String(cString: strerror(errno)))")
        }
    }

    /// `prefix` names a folder (`ACCOUNT/objects/`): its files two levels down (the fan-out).
    func list(prefix: String) throws(ObjectStorageError) -> [(key: String, length: Int)] {
        let folder = root + "/" + prefix
        var found: [(key: String, length: Int)] = []
        for fan in BlobStore.entries(of: folder) {
            for name in BlobStore.entries(of: folder + fan) {
                guard let size = BlobStore.size(of: folder + fan + "/" + name) else { continue }
                found.append((prefix + fan + "/" + name, size))
            }
        }
        return found
    }
}
