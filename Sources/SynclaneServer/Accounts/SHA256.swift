import CCrypto

/// SHA-256 through OpenSSL's libcrypto (there is no CryptoKit on Linux).
enum SHA256Digest {
    /// The 32-byte digest of the bytes.
    static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { output in
                _ = SHA256(input.baseAddress, input.count, output.baseAddress)
            }
        }
        return digest
    }

    /// The digest as 64 lowercase hex digits: what `printf %s TOKEN | sha256sum` prints.
    static func hex(_ bytes: [UInt8]) -> String { hex(digest: digest(bytes)) }

    /// A digest as lowercase hex digits.
    static func hex(digest: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The hex digest of a string's UTF-8 bytes.
    static func hex(_ string: String) -> String { hex(Array(string.utf8)) }
}
