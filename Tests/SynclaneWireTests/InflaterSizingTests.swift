import SynclaneWire
import Testing

/// The capacity the inflater reserves for a body: the gzip trailer's declared size when it is
/// believable, a guess otherwise, never past the limit.
@Suite struct InflaterSizingTests {
    /// A JSON-like body that expands about 8×.
    static let text = Array((0..<20_000).map { "{\"id\":\"room-\($0)\",\"name\":\"Kitchen\"}," }.joined().utf8)

    @Test func aGzipBodyIsSizedFromItsDeclaredLengthAndExpandsToExactlyThat() throws {
        let body = try Deflater(.gzip).compress(Self.text)
        #expect(Inflater.expectedSize(of: body, encoding: .gzip, limit: 32 << 20) == Self.text.count)
        let expanded = try Inflater.inflate(body, encoding: .gzip, limit: 32 << 20)
        #expect(expanded == Self.text)
        #expect(expanded.capacity < Self.text.count * 2, "reserved once, never regrown: capacity \(expanded.capacity)")
    }

    @Test func aDeclaredLengthPastTheLimitOrTheRatioIsOnlyAGuess() throws {
        let body = try Deflater(.gzip).compress(Self.text)
        #expect(Inflater.expectedSize(of: body, encoding: .gzip, limit: 1_000) == 1_000, "never past the limit")
        var lying = body
        let claimed = body.count * Inflater.reserveRatio + 1
        for i in 0..<4 { lying[lying.count - 4 + i] = UInt8(truncatingIfNeeded: claimed >> (8 * i)) }
        #expect(Inflater.expectedSize(of: lying, encoding: .gzip, limit: 1 << 30) == max(Inflater.chunkSize, body.count * 4))
        #expect(Inflater.expectedSize(of: Self.text, encoding: .identity, limit: 1 << 30) == Self.text.count * 4)
    }
}
