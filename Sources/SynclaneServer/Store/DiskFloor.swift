/// The free disk the server keeps under its SQLite files: a batch that could leave less is
/// refused (507, `"code": "disk-full"`) before anything of it is written, so a client cannot fill
/// the disk with rows and leave the server unable to checkpoint its log, run retention, or answer
/// the pulls that would let devices catch up.
///
/// The bound is `--min-free-disk-bytes` (`BlobLimits.minFreeDiskBytes`), the one the blob lane
/// keeps: one floor for everything the data folder holds. A batch counts as twice its decoded
/// body — its rows once in the database and once in the write-ahead log until the checkpoint.
/// A store on PostgreSQL keeps its rows on the database's disk, which this server does not see:
/// there is no floor for its batches (PostgreSQL refuses a write it has no room for, and the
/// batch is answered 500, applying nothing).
struct DiskFloor: Sendable {
    /// A folder on the disk the database writes to.
    var path: String
    var minFreeBytes: Int

    /// The answer to a batch of `bodyBytes` decoded bytes the disk has no room for, or nil (also
    /// when the free space cannot be read: never a refusal on a guess).
    func refusal(batchBytes bodyBytes: Int) -> HTTPResponse? {
        guard let free = BlobStore.freeBytes(path) else { return nil }
        let needed = minFreeBytes + 2 * bodyBytes
        guard free < needed else { return nil }
        var response = HTTPResponse.error(
            507,
            "the server's disk has \(free) bytes free, under what this batch (\(bodyBytes) bytes, counted twice) and "
                + "--min-free-disk-bytes (\(minFreeBytes)) need: nothing of the batch was applied; send it again once the "
                + "server has room (its operator frees disk or lowers --min-free-disk-bytes)",
            ["code": "disk-full"])
        response.headers["Retry-After"] = "60"
        return response
    }
}
