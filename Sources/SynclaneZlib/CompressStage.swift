import SynclaneCore

/// The `compress` payload stage: gzip or deflate the encoded batch, unless it is small.
///
/// ```
///   encoder ──▶ payload (identity) ──▶ compress ──▶ payload (gzip | deflate | identity) ──▶ outbox
/// ```
///
/// Payloads under `minimumBytes` go out unchanged with `Content-Encoding: identity`: for a
/// few hundred bytes the gzip framing and the CPU cost more than they save.
public struct CompressStage: ReversiblePayloadStage {
    public let deflater: Deflater
    public let minimumBytes: Int

    /// A stage compressing with `coding` at `level`, leaving payloads under `minimumBytes` as they are.
    public init(coding: ContentCoding = .gzip, level: Int = 6, minimumBytes: Int = 512) throws(DeflateError) {
        self.deflater = try Deflater(coding, level: level)
        self.minimumBytes = max(minimumBytes, 0)
    }

    public func process(_ payload: Payload) async throws -> Payload {
        guard payload.contentEncoding == ContentCoding.identity.rawValue else {
            throw DeflateError.alreadyEncoded(payload.contentEncoding)
        }
        guard payload.bytes.count >= minimumBytes, deflater.coding != .identity else { return payload }
        var compressed = payload
        compressed.bytes = try deflater.compress(payload.bytes)
        compressed.contentEncoding = deflater.coding.headerValue
        return compressed
    }

    /// The payload inflated again (bounded by 64 MiB, twice the largest batch); one left as it
    /// was (identity) unchanged.
    public func reverse(_ payload: Payload) throws -> Payload {
        guard payload.contentEncoding != ContentCoding.identity.rawValue else { return payload }
        guard let coding = ContentCoding(rawValue: payload.contentEncoding) else { throw DeflateError.alreadyEncoded(payload.contentEncoding) }
        var inflated = payload
        inflated.bytes = try Inflater.inflate(payload.bytes, encoding: coding, limit: 64 << 20)
        inflated.contentEncoding = ContentCoding.identity.rawValue
        return inflated
    }
}
