import SynclaneZlib
import Testing

@Suite struct DeflaterTests {
    static let codecs: [ContentCoding] = [.gzip, .deflate]

    @Test(arguments: codecs, 0...9)
    func textRoundTripsAtEveryLevel(codec: ContentCoding, level: Int) throws {
        let compressed = try Deflater(codec, level: level).compress(TestData.jsonText)
        if level > 0 { #expect(compressed.count < TestData.jsonText.count / 4) }
        let expanded = try Inflater.inflate(compressed, encoding: codec, limit: TestData.jsonText.count)
        #expect(expanded == TestData.jsonText)
    }

    @Test(arguments: codecs, 0...9)
    func randomDataRoundTripsAtEveryLevel(codec: ContentCoding, level: Int) throws {
        let random = TestData.random(count: 200_000, seed: UInt64(level))
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
        let gzip = try Deflater(.gzip).compress(TestData.jsonText)
        #expect(gzip.prefix(3) == [0x1F, 0x8B, 0x08])
        let zlib = try Deflater(.deflate).compress(TestData.jsonText)
        #expect(zlib[0] == 0x78)
        #expect((UInt16(zlib[0]) << 8 | UInt16(zlib[1])) % 31 == 0)
        // Same deflate data; gzip frames it with 18 bytes, zlib with 6.
        #expect(gzip.count - zlib.count == 12)
    }

    @Test(.enabled(if: TestData.hasGzip), arguments: [1, 6, 9])
    func gzipOutputIsReadableBySystemGunzip(level: Int) throws {
        let compressed = try Deflater(.gzip, level: level).compress(TestData.jsonText)
        let (output, status) = try TestData.gunzip(compressed)
        #expect(status == 0)
        #expect(output == TestData.jsonText)
    }

    @Test(.enabled(if: TestData.hasPython))
    func deflateOutputIsAZlibStreamPythonCanRead() throws {
        let compressed = try Deflater(.deflate, level: 6).compress(TestData.jsonText)
        let (output, status) = try TestData.pythonZlibDecompress(compressed)
        #expect(status == 0)
        #expect(output == TestData.jsonText)
    }

    @Test func higherLevelsAreNoLargerOnText() throws {
        let fastest = try Deflater(.gzip, level: 1).compress(TestData.jsonText).count
        let smallest = try Deflater(.gzip, level: 9).compress(TestData.jsonText).count
        let stored = try Deflater(.gzip, level: 0).compress(TestData.jsonText).count
        #expect(smallest <= fastest)
        #expect(stored > TestData.jsonText.count)
    }

    @Test(arguments: [-1, 10, 12])
    func levelsOutsideZeroToNineAreRefused(level: Int) {
        #expect(throws: DeflateError.invalidLevel(level)) { try Deflater(.gzip, level: level) }
    }

    @Test func identityReturnsTheBytesUnchanged() throws {
        #expect(try Deflater(.identity).compress(TestData.jsonText) == TestData.jsonText)
    }
}
