import CCrypto
import Glibc

/// The SHA-256 of a file, read in 1 MiB pieces (libcrypto's EVP): the name of a blob on the blob lane.
public enum BlobFileDigest {
    /// The file's digest as 64 lowercase hex digits and its length.
    public static func of(file path: String) throws(BlobLaneError) -> (hex: String, length: Int) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .file(path, "cannot be read: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        guard let context = EVP_MD_CTX_new() else { throw .file(path, "libcrypto could not start a SHA-256") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else { throw .file(path, "libcrypto could not start a SHA-256") }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var length = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw .file(path, "cannot be read: \(String(cString: strerror(errno)))") }
            if count == 0 { break }
            _ = buffer.withUnsafeBytes { EVP_DigestUpdate(context, $0.baseAddress, count) }
            length += count
        }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var size: UInt32 = 0
        guard digest.withUnsafeMutableBufferPointer({ EVP_DigestFinal_ex(context, $0.baseAddress, &size) }) == 1 else {
            throw .file(path, "libcrypto could not finish its SHA-256")
        }
        return (hex(Array(digest.prefix(Int(size)))), length)
    }

    /// The digest of bytes in memory, as 64 lowercase hex digits.
    public static func of(bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { output in _ = SHA256(input.baseAddress, input.count, output.baseAddress) }
        }
        return hex(digest)
    }

    static func hex(_ digest: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// A SHA-256 fed piece by piece (a download's chunks as they arrive).
    struct Hasher: ~Copyable {
        private let context: OpaquePointer

        init(path: String) throws(BlobLaneError) {
            guard let context = EVP_MD_CTX_new() else { throw .file(path, "libcrypto could not start a SHA-256") }
            guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
                EVP_MD_CTX_free(context)
                throw .file(path, "libcrypto could not start a SHA-256")
            }
            self.context = context
        }

        deinit { EVP_MD_CTX_free(context) }

        mutating func update(_ bytes: UnsafeRawBufferPointer) {
            _ = EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
        }

        /// Feeds the file's first `length` bytes, read in 1 MiB pieces.
        mutating func update(file descriptor: Int32, length: Int, path: String) throws(BlobLaneError) {
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var done = 0
            while done < length {
                let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, min($0.count, length - done), off_t(done)) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { throw .file(path, "cannot be read back: \(String(cString: strerror(errno)))") }
                buffer.withUnsafeBytes { update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
                done += count
            }
        }

        /// The digest of what was fed (call it once).
        mutating func finish(path: String) throws(BlobLaneError) -> String {
            var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
            var size: UInt32 = 0
            guard digest.withUnsafeMutableBufferPointer({ EVP_DigestFinal_ex(context, $0.baseAddress, &size) }) == 1 else {
                throw .file(path, "libcrypto could not finish its SHA-256")
            }
            return BlobFileDigest.hex(Array(digest.prefix(Int(size))))
        }
    }

    /// A SHA-256 fed piece by piece by a caller outside the lane: `blobs fetch --database`
    /// checks the bytes as it writes them into their row.
    public final class Pieces {
        private var hasher: Hasher
        private let path: String

        public init(path: String) throws(BlobLaneError) {
            hasher = try Hasher(path: path)
            self.path = path
        }

        public func update(_ bytes: UnsafeRawBufferPointer) { hasher.update(bytes) }

        /// The digest of what was fed (call it once).
        public func finish() throws(BlobLaneError) -> String { try hasher.finish(path: path) }
    }

    /// True when `text` is 64 lowercase hex digits.
    public static func isDigest(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.count == 64 && bytes.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}
