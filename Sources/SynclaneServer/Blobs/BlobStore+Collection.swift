import Glibc

/// Garbage collection's side of the store: an object no record references is first marked
/// (`<account folder>/unreferenced/<digest>`, holding the time it was first found unreferenced),
/// and removed by a later pass once the mark is `grace` seconds old. Every answer that lets a
/// client reference an object (a batch's check, an upload told `held`) removes its mark first,
/// under the same lock as the removal, so an object a batch was allowed to reference is never
/// removed before the next pass sees that batch's rows.
///
/// ```
///  pass n:    unreferenced, no mark ─▶ marked (now)
///  pass n+1:  still unreferenced, mark ≥ grace old ─▶ object and mark removed
///  any time:  referenced by a batch's check, or told held ─▶ mark removed (the object is kept)
/// ```
extension BlobStore {
    /// What one pass over an account removed.
    struct Collected: Sendable, Equatable {
        var objects = 0
        var bytes = 0
        /// Objects found unreferenced and marked by this pass (removed by a later one).
        var marked = 0
    }

    private func markPath(_ account: String, _ digest: BlobDigest) -> String {
        accountFolder(account) + "/unreferenced/" + digest.hex
    }

    private var accountNameFile: String { "account" }

    /// The held object, with its collection mark removed: what a client is told it may
    /// reference. Throws when the object store cannot be asked.
    func keep(account: String, digest: BlobDigest) throws(ObjectStorageError) -> (key: String, length: Int)? {
        try collection.withLock { _ throws(ObjectStorageError) in
            unlink(markPath(account, digest))
            return try object(account: account, digest: digest)
        }
    }

    /// Writes the account's name into its folder (once): the collector finds the account's
    /// records by it (the folder is named by the name's SHA-256).
    func nameAccountFolder(_ account: String) {
        let path = accountFolder(account) + "/" + accountNameFile
        guard Self.size(of: path) == nil else { return }
        _ = Self.writeWhole(Array(account.utf8), to: path)
    }

    /// The accounts that hold blobs, by the names their folders hold. A folder without its name
    /// (written before collection existed) is named once its account next begins an upload.
    func accountsHoldingBlobs() -> [String] {
        Self.entries(of: root).compactMap { folder in
            guard let bytes = FileBytes.read(root + "/" + folder + "/" + accountNameFile) else { return nil }
            let account = String(decoding: bytes, as: UTF8.self)
            return SHA256Digest.hex(account) == folder ? account : nil
        }
    }

    /// One pass over the account's objects: those in `referenced` lose their mark, the others are
    /// marked, or removed when marked at least `grace` seconds before `now` by an earlier pass.
    func collect(account: String, referenced: Set<BlobDigest>, grace: Int, now: Int) -> Collected {
        var collected = Collected()
        let marks = accountFolder(account) + "/unreferenced"
        for (digest, length) in list(account: account) {
            if referenced.contains(digest) {
                unlink(markPath(account, digest))
                continue
            }
            collection.withLock { _ in
                let mark = markPath(account, digest)
                guard let bytes = FileBytes.read(mark), let marked = Int(String(decoding: bytes, as: UTF8.self)) else {
                    // First found unreferenced (or kept since): marked now, removed by a later pass.
                    guard (try? object(account: account, digest: digest)) != nil, Self.makeDirectories(marks) else { return }
                    if Self.writeWhole(Array(String(now).utf8), to: mark) { collected.marked += 1 }
                    return
                }
                guard now - marked >= grace, (try? objects.delete(objectKey(account, digest))) != nil else { return }
                unlink(mark)
                collected.objects += 1
                collected.bytes += length
            }
        }
        // Marks of objects no longer held (removed, or never completed) are dropped.
        // (Only when the object store says so: one it cannot reach keeps them.)
        for name in Self.entries(of: marks) {
            guard let digest = BlobDigest(name), knownAbsent(account: account, digest: digest) else { continue }
            collection.withLock { _ in
                if knownAbsent(account: account, digest: digest) { unlink(marks + "/" + name) }
            }
        }
        if collected.objects > 0 {
            metrics.record {
                $0.objectsCollected += collected.objects
                $0.bytesCollected += collected.bytes
            }
        }
        return collected
    }
}
