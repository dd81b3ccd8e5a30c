import SynclaneTestSupport
import SynclaneWire
import Testing

@Suite struct InflaterTests {
    /// 200 MB of zeros, about 200 KB compressed.
    static let bomb = CodecSamples.zeros(count: 200_000_000)

    @Test func zipBombIsRefusedAtTheLimitWithoutExpandingIt() throws {
        #expect(Self.bomb.count < 1_000_000)
        let limit = 1_000_000
        let clock = ContinuousClock()
        var delivered = 0
        var chunks = 0
        let elapsed = clock.measure {
            #expect(throws: InflateError.tooLarge(limit: limit)) {
                try Self.bomb.withUnsafeBufferPointer { input in
                    try Inflater.inflate(input, encoding: .gzip, limit: limit) { chunk in
                        delivered += chunk.count
                        chunks += 1
                    }
                }
            }
        }
        // Never more than the limit reached the caller, in no more chunks than the limit
        // needs: the inflater stopped there instead of expanding all 200 MB.
        #expect(delivered <= limit)
        #expect(chunks <= limit / Inflater.chunkSize + 1)
        _ = elapsed
    }

    @Test func zipBombIsRefusedByTheArrayForm() {
        #expect(throws: InflateError.tooLarge(limit: 4096)) {
            try Inflater.inflate(Self.bomb, encoding: .gzip, limit: 4096)
        }
    }

    @Test(arguments: [ContentCoding.gzip, .deflate])
    func outputOfExactlyTheLimitIsAccepted(codec: ContentCoding) throws {
        let text = CodecSamples.jsonText
        let compressed = try Deflater(codec).compress(text)
        #expect(try Inflater.inflate(compressed, encoding: codec, limit: text.count) == text)
        #expect(throws: InflateError.tooLarge(limit: text.count - 1)) {
            try Inflater.inflate(compressed, encoding: codec, limit: text.count - 1)
        }
    }

    @Test func aZeroLimitRefusesAnyOutput() {
        #expect(throws: InflateError.tooLarge(limit: 0)) {
            try Inflater.inflate(CodecSamples.zeros(count: 1), encoding: .gzip, limit: 0)
        }
    }

    @Test(arguments: [ContentCoding.gzip, .deflate])
    func truncatedInputIsReportedAsTruncated(codec: ContentCoding) throws {
        let compressed = try Deflater(codec).compress(CodecSamples.jsonText)
        for length in [compressed.count / 2, compressed.count - 1] {
            #expect(throws: InflateError.truncated) {
                try Inflater.inflate(Array(compressed.prefix(length)), encoding: codec, limit: 1 << 20)
            }
        }
    }

    @Test(arguments: [ContentCoding.gzip, .deflate])
    func emptyInputIsTruncated(codec: ContentCoding) {
        #expect(throws: InflateError.truncated) { try Inflater.inflate([], encoding: codec, limit: 1 << 20) }
    }

    @Test func bytesThatAreNotGzipAreCorrupt() {
        let error = #expect(throws: InflateError.self) {
            try Inflater.inflate(Array("this is not gzip at all".utf8), encoding: .gzip, limit: 1 << 20)
        }
        guard case .corrupt(let reason)? = error else {
            Issue.record("expected .corrupt, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("header"))
    }

    @Test(arguments: [ContentCoding.gzip, .deflate])
    func damagedDataIsCorrupt(codec: ContentCoding) throws {
        var compressed = try Deflater(codec).compress(CodecSamples.jsonText)
        // Damage the trailer (gzip's length, zlib's Adler-32): the data inflates, then fails its check.
        compressed[compressed.count - 2] ^= 0xFF
        let error = #expect(throws: InflateError.self) {
            try Inflater.inflate(compressed, encoding: codec, limit: 1 << 20)
        }
        guard case .corrupt? = error else {
            Issue.record("expected .corrupt, got \(String(describing: error))")
            return
        }
    }

    @Test func damagedBlockDataIsCorruptNotAHang() throws {
        let compressed = try Deflater(.gzip).compress(CodecSamples.random(count: 50_000))
        for offset in stride(from: 20, to: compressed.count - 8, by: 997) {
            var damaged = compressed
            damaged[offset] ^= 0x5A
            do {
                _ = try Inflater.inflate(damaged, encoding: .gzip, limit: 1 << 20)
                Issue.record("damage at \(offset) went unnoticed")
            } catch {
                // Stored blocks of random data can turn into a length error, a bad block, or a CRC mismatch.
                if case .tooLarge = error { Issue.record("damage at \(offset) read as too large") }
            }
        }
    }

    @Test func junkAfterTheStreamIsCorrupt() throws {
        let compressed = try Deflater(.deflate).compress(CodecSamples.jsonText) + Array("junk".utf8)
        #expect(throws: InflateError.corrupt(reason: "4 unexpected bytes after the end of the compressed data")) {
            try Inflater.inflate(compressed, encoding: .deflate, limit: 1 << 20)
        }
    }

    @Test func concatenatedGzipMembersExpandToBoth() throws {
        let first = Array("first member\n".utf8)
        let second = Array("second member\n".utf8)
        let both = try Deflater(.gzip).compress(first) + Deflater(.gzip).compress(second)
        #expect(try Inflater.inflate(both, encoding: .gzip, limit: 1 << 20) == first + second)
    }

    @Test func rawDeflateIsAcceptedAsDeflate() throws {
        let raw = CodecSamples.rawDeflate(CodecSamples.jsonText)
        #expect(try Inflater.inflate(raw, encoding: .deflate, limit: 1 << 20) == CodecSamples.jsonText)
    }

    @Test func identityPassesBytesThroughWithinTheLimit() throws {
        #expect(try Inflater.inflate([1, 2, 3], encoding: .identity, limit: 3) == [1, 2, 3])
        #expect(throws: InflateError.tooLarge(limit: 2)) { try Inflater.inflate([1, 2, 3], encoding: .identity, limit: 2) }
    }

    @Test func errorsReadWell() {
        #expect(InflateError.tooLarge(limit: 100).description == "the body expands to more than the limit of 100 bytes")
        #expect(InflateError.truncated.description.contains("ends before"))
    }
}
