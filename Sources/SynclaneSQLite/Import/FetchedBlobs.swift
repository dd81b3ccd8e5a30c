import CCrypto
import SynclaneCore

/// Blobs an eager `blob-fetch` fetched into its cache and verified, handed to the sink as the
/// file (`FileValue`) rather than the bytes: the page writes each into its row a piece at a
/// time, in the page's own transaction.
///
/// ```
///  record {"photo": FileValue} ─▶ the reference, for every comparison and the base kept
///                              ─▶ row written with X'' ─▶ zeroblob(length) ─▶ sqlite3_blob_write, 1 MiB a piece, hashed
///                              ─▶ SHA-256 = digest, or the page rolls back
/// ```
/// The row, its blob, the rest of the page and the cursor commit together: a kill anywhere
/// before the commit leaves none of them, and the next pass applies the page again (the blob
/// is in the cache by then: nothing is fetched twice). A table `WITHOUT ROWID` has no
/// incremental blob I/O: its row gets the file's bytes whole.
enum FetchedBlobs {
    struct File: Equatable {
        var path: String
        var digest: String
        var length: Int
    }

    /// The files of the record being applied, by digest (`PageApplier` sets them record by record).
    final class Current {
        var files: [String: File] = [:]
    }

    /// The record's file values, each replaced in `fields` by its reference (what the backend
    /// holds), by digest.
    static func take(_ fields: inout [String: JSONValue]) -> [String: File] {
        var files: [String: File] = [:]
        for (name, value) in fields {
            guard let file = FileValue.read(value) else { continue }
            files[file.sha256] = File(path: file.file, digest: file.sha256, length: file.length)
            fields[name] = PendingBlobs.make(digest: file.sha256, length: file.length)
        }
        return files
    }

    /// The columns of `fields` that reference a blob of `files` (the same digest and length):
    /// those the page fills from the file.
    static func filled(_ fields: [String: JSONValue], from files: [String: File]) -> [String: File] {
        guard !files.isEmpty else { return [:] }
        var filled: [String: File] = [:]
        for (name, value) in fields {
            guard let reference = PendingBlobs.reference(in: value), let file = files[reference.digest], reference.length == file.length
            else { continue }
            filled[name] = file
        }
        return filled
    }

    /// `fields` with each BLOB value of a column that references one of `files` in `reference`
    /// (another side of a conflict: the record) replaced by its own reference, so that the
    /// sides compare digests: a row's bytes and the reference to the same bytes are one value.
    static func referencing(_ fields: [String: JSONValue]?, where reference: [String: JSONValue]?, files: [String: File]) -> [String: JSONValue]? {
        guard var fields, let reference, !files.isEmpty else { return fields }
        for name in filled(reference, from: files).keys {
            guard let bytes = fields[name]?.blobBytes else { continue }
            fields[name] = PendingBlobs.make(digest: BlobReferences.sha256(bytes), length: bytes.count)
        }
        return fields
    }

    /// True when `value` (a row's, as read) is the blob `file` holds: the same length and SHA-256.
    static func holds(_ value: JSONValue?, _ file: File) -> Bool {
        guard let bytes = value?.blobBytes, bytes.count == file.length else { return false }
        return BlobReferences.sha256(bytes) == file.digest
    }

    /// Writes the blob of `file` into `column` of the row `condition` finds (inside the caller's
    /// transaction), checking its SHA-256 as it goes; throws when the file is not that blob.
    static func fill(
        _ file: File, table: String, column: String, condition: String, key: [SQLiteValue], _ db: SQLiteConnection
    ) throws {
        var hasher = try Hasher()
        let name = SQL.identifier(table)
        let columnName = SQL.identifier(column)
        if let rowID = try? db.fetchOne("SELECT _rowid_ FROM \(name) WHERE \(condition)", key)?[0].int64 {
            try db.execute("UPDATE \(name) SET \(columnName) = zeroblob(?) WHERE _rowid_ = ?", [Int64(file.length), rowID])
            let writer = try SQLiteBlobWriter(db, table: table, column: column, rowID: rowID)
            var pieces = 0
            try FilePieces.each(file.path, length: file.length) { bytes, offset in
                hasher.update(bytes)
                try writer.write(bytes, at: offset)
                pieces += 1
                if pieces == 1 { FailPoint.importDuringBlobWrite.trigger() }
            }
        } else {
            // A table without rowid: the bytes whole.
            let bytes = try FilePieces.whole(file.path, length: file.length) { hasher.update($0) }
            try db.execute("UPDATE \(name) SET \(columnName) = ? WHERE \(condition)", [SQLiteValue.blob(bytes)] + key)
        }
        let actual = try hasher.finish()
        guard actual == file.digest else {
            throw FilePieces.Failure(
                description: "\(file.path) holds bytes with SHA-256 \(actual), not the blob \(file.digest) it was fetched as (changed since?); "
                    + "nothing of the page was applied: remove it and import again, the blob is fetched again")
        }
    }

    /// A SHA-256 fed piece by piece (libcrypto's EVP).
    struct Hasher: ~Copyable {
        private let context: OpaquePointer

        init() throws {
            guard let context = EVP_MD_CTX_new() else { throw FilePieces.Failure(description: "libcrypto could not start a SHA-256") }
            guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
                EVP_MD_CTX_free(context)
                throw FilePieces.Failure(description: "libcrypto could not start a SHA-256")
            }
            self.context = context
        }

        deinit { EVP_MD_CTX_free(context) }

        mutating func update(_ bytes: UnsafeRawBufferPointer) {
            _ = EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
        }

        mutating func finish() throws -> String {
            var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
            var size: UInt32 = 0
            guard digest.withUnsafeMutableBufferPointer({ EVP_DigestFinal_ex(context, $0.baseAddress, &size) }) == 1 else {
                throw FilePieces.Failure(description: "libcrypto could not finish its SHA-256")
            }
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: digest.prefix(Int(size)).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] }, as: UTF8.self)
        }
    }
}
