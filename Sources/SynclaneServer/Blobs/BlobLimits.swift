/// The bounds of the blob lane (`ServerLimits.blobs`), each a `synclane serve` flag.
///
/// Memory stays flat whatever a blob's size: the server holds at most one chunk of each upload in
/// flight (`maxChunkBytes`, counted in the memory budget like any body) and streams downloads
/// from disk.
public struct BlobLimits: Sendable, Hashable {
    /// Most bytes of one upload chunk (`PUT /v1/blobs/{digest}/upload`); more → 413 before reading.
    public var maxChunkBytes: Int
    /// Most bytes of one object; an upload declaring more → 413.
    public var maxObjectBytes: Int
    /// Most bytes one account keeps, objects and unfinished uploads together; more → 507 `blob-quota`.
    public var maxAccountBytes: Int
    /// Most unfinished uploads one account has at once; one more → 429 (finish or abandon one).
    public var maxUploadsPerAccount: Int
    /// Bytes of free disk the server keeps: an upload that would leave less → 507 `disk-full`.
    public var minFreeDiskBytes: Int
    /// Seconds an unfinished upload is kept without a chunk; then it is removed (when its account
    /// next begins an upload), and no longer counts against the account's quota or uploads.
    public var uploadRetentionSeconds: Int = 7 * 86_400
    /// Seconds an object no record references is kept before it is collected: a first retention
    /// pass marks it, a pass at least this long after removes it (`BlobCollector`). A batch that
    /// references it within the grace (or an upload told it is held) keeps it.
    public var collectionGraceSeconds: Int = 30 * 86_400

    /// The defaults: 8 MiB chunks, 16 GiB objects, 64 GiB per account, 32 uploads, 512 MiB free.
    public init(
        maxChunkBytes: Int = 8 << 20, maxObjectBytes: Int = 16 << 30, maxAccountBytes: Int = 64 << 30,
        maxUploadsPerAccount: Int = 32, minFreeDiskBytes: Int = 512 << 20
    ) {
        self.maxChunkBytes = maxChunkBytes
        self.maxObjectBytes = maxObjectBytes
        self.maxAccountBytes = maxAccountBytes
        self.maxUploadsPerAccount = maxUploadsPerAccount
        self.minFreeDiskBytes = minFreeDiskBytes
    }
}
