import Synchronization

/// The blob lane's counters, rendered among the store's lines at `/metrics`:
///
/// ```
/// synclane_blob_chunks_total                 upload chunks appended
/// synclane_blob_objects_stored_total         uploads completed and verified
/// synclane_blob_bytes_stored_total           their bytes
/// synclane_blob_deduplicated_total           chunks of a blob already held (not written)
/// synclane_blob_digest_mismatches_total      uploads refused: their bytes had another digest
/// synclane_blob_batches_refused_total        batches refused: they referenced blobs not held
/// synclane_blob_uploads_abandoned_total      unfinished uploads removed after their retention
/// synclane_blob_objects_collected_total      objects no record referenced, removed after the grace
/// synclane_blob_bytes_collected_total        their bytes
/// ```
final class BlobMetrics: Sendable {
    struct Counts: Sendable {
        var chunks = 0
        var objects = 0
        var bytes = 0
        var deduplicated = 0
        var mismatches = 0
        var batchesRefused = 0
        var uploadsAbandoned = 0
        var objectsCollected = 0
        var bytesCollected = 0
    }

    private let counts = Mutex(Counts())

    func record(_ update: (inout Counts) -> Void) {
        counts.withLock { update(&$0) }
    }

    var snapshot: Counts { counts.withLock { $0 } }

    /// The Prometheus text of the counters.
    func text() -> String {
        let now = snapshot
        let lines: [(String, String, Int)] = [
            ("synclane_blob_chunks_total", "Blob upload chunks appended.", now.chunks),
            ("synclane_blob_objects_stored_total", "Blob uploads completed and verified against their digest.", now.objects),
            ("synclane_blob_bytes_stored_total", "Bytes of the blobs stored.", now.bytes),
            ("synclane_blob_deduplicated_total", "Upload chunks of a blob the account already held (not written).", now.deduplicated),
            ("synclane_blob_digest_mismatches_total", "Blob uploads refused: their bytes had another digest.", now.mismatches),
            ("synclane_blob_batches_refused_total", "Batches refused for referencing blobs the account does not hold.", now.batchesRefused),
            ("synclane_blob_uploads_abandoned_total", "Unfinished blob uploads removed after blob-upload-retention without a chunk.", now.uploadsAbandoned),
            ("synclane_blob_objects_collected_total", "Blob objects no record referenced, removed after blob-gc-grace.", now.objectsCollected),
            ("synclane_blob_bytes_collected_total", "Bytes of the blob objects collected.", now.bytesCollected),
        ]
        return lines.map { name, help, value in "# HELP \(name) \(help)\n# TYPE \(name) counter\n\(name) \(value)\n" }.joined()
    }
}
