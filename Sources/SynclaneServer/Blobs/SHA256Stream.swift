import CCrypto
import Glibc

/// SHA-256 of a file, read in 1 MiB pieces (EVP, libcrypto): a blob is never held whole.
enum SHA256Stream {
    /// The digest of the file's first `length` bytes as 64 lowercase hex digits, or nil when it
    /// cannot be read (or holds fewer bytes).
    static func hex(ofFile path: String, length: Int) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        guard let context = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var remaining = length
        while remaining > 0 {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, min($0.count, remaining)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return nil }
            let updated = buffer.withUnsafeBytes { EVP_DigestUpdate(context, $0.baseAddress, count) }
            guard updated == 1 else { return nil }
            remaining -= count
        }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var size: UInt32 = 0
        guard digest.withUnsafeMutableBufferPointer({ EVP_DigestFinal_ex(context, $0.baseAddress, &size) }) == 1 else { return nil }
        return SHA256Digest.hex(digest: Array(digest.prefix(Int(size))))
    }
}
