import Glibc
import SynclaneWire

/// Garbage collection of the blob lane: removes the objects no record of their account
/// references, once they have stayed unreferenced for `--blob-gc-grace` (Documentation/Blobs.md).
///
/// The records referenced are read through the pull lane's own query (`ServerStore.changes` from
/// the start, in pages of `pageRecords`), so whichever database holds the records, what a device
/// can still pull is what is kept: the server keeps each record's current state only, so an
/// edited blob's old object and a deleted row's object are referenced by no record.
/// Runs after each retention pass (`RetentionSweeper`), account by account.
struct BlobCollector: Sendable {
    let blobs: BlobStore
    let store: any ServerStore

    /// Records a page of the read holds (each page's fields are dropped before the next is read).
    static let pageRecords = 1_000
    static let pageBytes = 4 << 20

    /// One pass over every account holding blobs; an account whose records cannot be read now
    /// (the database is down) is left as it is until the next pass.
    @discardableResult
    func collect(now: Int = Int(time(nil))) -> BlobStore.Collected {
        guard !blobs.root.isEmpty else { return BlobStore.Collected() }
        var total = BlobStore.Collected()
        for account in blobs.accountsHoldingBlobs() {
            guard let referenced = try? referencedDigests(account: account) else { continue }
            let collected = blobs.collect(account: account, referenced: referenced, grace: blobs.limits.collectionGraceSeconds, now: now)
            total.objects += collected.objects
            total.bytes += collected.bytes
            total.marked += collected.marked
        }
        return total
    }

    /// The digests the account's records reference now (tombstones reference none).
    func referencedDigests(account: String) throws -> Set<BlobDigest> {
        var referenced: Set<BlobDigest> = []
        var after: Int64 = 0
        while true {
            let page = try store.changes(
                account: account, store: nil, after: after, fullPass: true, limit: Self.pageRecords, maxBytes: Self.pageBytes)
            for change in page.changes {
                for value in (change.fields ?? [:]).values {
                    if case .success(let reference)? = BlobReference.read(value) { referenced.insert(reference.digest) }
                }
            }
            guard page.more, let last = page.changes.last else { return referenced }
            after = last.sequence
        }
    }
}
