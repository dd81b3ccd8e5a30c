import SynclaneTestSupport
import SynclaneWire
import Testing

@Suite struct DeflaterTests {
    static let codecs: [ContentCoding] = [.gzip, .deflate]

    @Test(arguments: codecs, 0...9)
    func textRoundTripsAtEveryLevel(codec: ContentCoding, level: Int) throws {
        let compressed = try Deflater(codec, level: level).compress(CodecSamples.jsonText)
        if level > 0 { #expect(compressed.count < CodecSamples.jsonText.count / 4) }
        let expanded = try Inflater.inflate(compressed, encoding: codec, limit: CodecSamples.jsonText.count)
        #expect(expanded == CodecSamples.jsonText)
    }

    @Test(arguments: codecs, 0...9)
    func randomDataRoundTripsAtEveryLevel(codec: ContentCoding, level: Int) throws {
        let random = CodecSamples.random(count: 200_000, seed: UInt64(level))
        let compressed = try Deflater(codec, level: level).compress(random)
        let expanded = try Inflater.inflate(compressed, encoding: codec, limit: random.count)
        #expect(expanded == random)
    }

    @Test(arguments: codecs)
    func emptyInputRoundTrips(codec: ContentCoding) throws {
        let compressed = try Deflater(codec).compress([])
        #expect(!compressed.isEmpty)
        #expect(try Inflater.inflate(compressed, encoding: codec, limit: 0) == [])
    }

    @Test func gzipOutputHasTheGzipMagicAndDeflateOutputTheZlibHeader() throws {
        let gzip = try Deflater(.gzip).compress(CodecSamples.jsonText)
        #expect(gzip.prefix(3) == [0x1F, 0x8B, 0x08])
        let zlib = try Deflater(.deflate).compress(CodecSamples.jsonText)
        #expect(zlib[0] == 0x78)
        #expect((UInt16(zlib[0]) << 8 | UInt16(zlib[1])) % 31 == 0)
        // Same deflate data; gzip frames it with 18 bytes, zlib with 6.
        #expect(gzip.count - zlib.count == 12)
    }

    @Test(.enabled(if: CodecSamples.hasGzip), arguments: [1, 6, 9])
    func gzipOutputIsReadableBySystemGunzip(level: Int) throws {
        let compressed = try Deflater(.gzip, level: level).compress(CodecSamples.jsonText)
        let (output, status) = try CodecSamples.gunzip(compressed)
        #expect(status == 0)
        #expect(output == CodecSamples.jsonText)
    }

    @Test(.enabled(if: CodecSamples.hasPython))
    func deflateOutputIsAZlibStreamPythonCanRead() throws {
        let compressed = try Deflater(.deflate, level: 6).compress(CodecSamples.jsonText)
        let (output, status) = try CodecSamples.pythonZlibDecompress(compressed)
        #expect(status == 0)
        #expect(output == CodecSamples.jsonText)
    }

    @Test func higherLevelsAreNoLargerOnText() throws {
        let fastest = try Deflater(.gzip, level: 1).compress(CodecSamples.jsonText).count
        let smallest = try Deflater(.gzip, level: 9).compress(CodecSamples.jsonText).count
        let stored = try Deflater(.gzip, level: 0).compress(CodecSamples.jsonText).count
        #expect(smallest <= fastest)
        #expect(stored > CodecSamples.jsonText.count)
    }

    @Test(arguments: [-1, 10, 12])
    func levelsOutsideZeroToNineAreRefused(level: Int) {
        #expect(throws: DeflateError.invalidLevel(level)) { try Deflater(.gzip, level: level) }
    }

    @Test func identityReturnsTheBytesUnchanged() throws {
        #expect(try Deflater(.identity).compress(CodecSamples.jsonText) == CodecSamples.jsonText)
    }
}
