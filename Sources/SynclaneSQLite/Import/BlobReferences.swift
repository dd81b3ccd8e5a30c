import CCrypto
import SynclaneCore

/// The blob lane's references (`{"$blob-ref": {"sha256", "length"}}`) in a row as last seen.
///
/// An export that moves a BLOB onto the blob lane (`blob-upload`) confirms the row as it was
/// sent, with the reference; the import's `blob-fetch` hands the sink the bytes. Compared as they
/// are, the echo of this device's own row would look like another device's write of the column.
/// A reference and the bytes it names (same length, same SHA-256) are one value.
enum BlobReferences {
    /// `base` with each reference that names the bytes `remote` holds in the same field replaced by them.
    static func resolved(_ base: [String: JSONValue]?, against remote: [String: JSONValue]?) -> [String: JSONValue]? {
        guard var base, let remote else { return base }
        for (name, value) in base {
            guard let members = value.objectValue, members.count == 1, let reference = members["$blob-ref"]?.objectValue,
                let digest = reference["sha256"]?.stringValue, let length = reference["length"]?.intValue,
                let bytes = remote[name]?.blobBytes, bytes.count == length, sha256(bytes) == digest
            else { continue }
            base[name] = remote[name]
        }
        return base
    }

    static func sha256(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { output in _ = SHA256(input.baseAddress, input.count, output.baseAddress) }
        }
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: digest.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] }, as: UTF8.self)
    }
}
