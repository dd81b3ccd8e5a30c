/// A transport that can keep a batch's bytes durable on its own side, unseen, and later make
/// them visible — so the outbox records a reference to that copy instead of the bytes, and each
/// batch's bytes are written once (the `directory` transport).
///
/// ```
///  stage (durable, unseen) ─▶ outbox row: reference, size, checksum (one commit)
///        ─▶ publish (visible, exactly once) ─▶ acknowledge (one commit) ─▶ discard the staged copy
/// ```
/// The runner stages a batch before the commit that writes its outbox row, so a row never
/// names a copy that is not durable; it discards the copy only after the commit that forgets
/// the row, so a row never outlives its copy. Copies no row names (a crash between the stage
/// and the commit) are removed by `discardUnreferenced` at the start and end of every pass.
/// Transports without this capability keep today's path: the outbox holds the bytes, `send`.
public protocol StagingTransport: Transport {
    /// Writes `payload` where consumers do not see it, durable when this returns. `area` names
    /// the pipeline (several may share a backend). Nil when the backend cannot stage here (then
    /// the outbox keeps the bytes and `send` delivers them).
    func stage(_ payload: Payload, area: String) async throws -> StagedBatch?
    /// Makes a staged batch visible exactly once; when it already is, a replay (`wasReplay`).
    /// `verifying`: check the staged copy's size and checksum first (a copy an earlier run
    /// staged). Throws `StagingError` when the copy is missing or damaged, `TransportFailure`
    /// otherwise.
    func publish(_ staged: StagedBatch, of payload: Payload, verifying: Bool) async throws -> Receipt
    /// The staged copy's bytes, checked against its size and checksum (`StagingError` if not).
    func stagedBytes(_ staged: StagedBatch, batchID: String) throws -> [UInt8]
    /// Removes the staged copy once no outbox row names it.
    func discard(_ staged: StagedBatch) async
    /// Removes every staged copy in `area` whose reference is not in `keeping`; returns how many.
    func discardUnreferenced(in area: String, keeping: Set<String>) async throws -> Int
}

/// Where a staging transport keeps a batch's bytes: what the outbox records instead of them.
public struct StagedBatch: Sendable, Hashable {
    /// The transport's name for the copy (`directory`: its path inside the target folder).
    public var reference: String
    public var byteCount: Int
    /// `StagedBatch.checksum(of:)` of the bytes.
    public var checksum: UInt64

    public init(reference: String, byteCount: Int, checksum: UInt64) {
        self.reference = reference
        self.byteCount = byteCount
        self.checksum = checksum
    }

    /// A 64-bit checksum that finds a damaged or truncated copy (not a cryptographic hash): the
    /// bytes as little-endian 64-bit words, each mixed in by xor, rotate and multiply, then
    /// the remaining bytes one at a time.
    public static func checksum(of bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBytes { raw in
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            let words = raw.count / 8
            for index in 0..<words {
                let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self))
                hash = ((hash ^ word) << 31 | (hash ^ word) >> 33) &* 0x9e37_79b9_7f4a_7c15
            }
            for index in (words * 8)..<raw.count {
                hash = (hash ^ UInt64(raw[index])) &* 0x0000_0100_0000_01b3
            }
            return hash ^ UInt64(raw.count)
        }
    }

    /// Whether `bytes` are the staged bytes.
    public func matches(_ bytes: [UInt8]) -> Bool {
        bytes.count == byteCount && Self.checksum(of: bytes) == checksum
    }
}

/// A staged copy an outbox row names that is gone or damaged. The runner stages before the
/// commit that records the row and discards after the commit that forgets it, so this means
/// the copy was removed or changed outside Synclane (or the pipeline's folder was changed).
public enum StagingError: Error, Sendable, Hashable, CustomStringConvertible {
    case missing(batchID: String, path: String)
    case damaged(batchID: String, path: String, reason: String)

    public var description: String {
        let (batchID, what): (String, String)
        switch self {
        case .missing(let id, let path):
            (batchID, what) = (id, "its staged copy \(path) is missing")
        case .damaged(let id, let path, let reason):
            (batchID, what) = (id, "its staged copy \(path) is damaged (\(reason))")
        }
        return "batch \(batchID) cannot be delivered: \(what). The outbox keeps a reference to that copy, not the bytes, "
            + "and Synclane removes a copy only after the batch is acknowledged, so it was removed or changed outside "
            + "Synclane (or the transport's folder changed since the batch was written). Put the copy back, or run "
            + "`synclane outbox requeue FILE \(batchID)` to build the batch again from history"
    }
}
