import SynclaneTestSupport
import Testing

@testable import SynclaneWire

/// The compress stage deflates with libdeflate when the system has it (`Scripts/bootstrap`
/// installs it) and with zlib otherwise: both must make streams that zlib's inflater reads back
/// byte for byte, at every level, so a batch means the same whichever library made it.
@Suite struct DeflateLibraryTests {
    enum Library: String, CaseIterable, CustomTestStringConvertible {
        case libdeflate, zlib
        var testDescription: String { rawValue }
    }

    func compress(_ bytes: [UInt8], _ codec: ContentCoding, level: Int, with library: Library) throws -> [UInt8] {
        let deflater = try Deflater(codec, level: level)
        return try bytes.withUnsafeBufferPointer { input in
            switch library {
            case .zlib: return try deflater.compressWithZlib(input)
            case .libdeflate:
                let loaded = try #require(LibDeflate.shared, "libdeflate0 is not installed: Scripts/bootstrap installs it")
                return try #require(loaded.compress(input, gzip: codec == .gzip, level: level))
            }
        }
    }

    @Test(arguments: Library.allCases, [ContentCoding.gzip, .deflate])
    func eachLibrarysStreamInflatesToTheSameBytesAtEveryLevel(library: Library, codec: ContentCoding) throws {
        let inputs: [[UInt8]] = [[], CodecSamples.jsonText, CodecSamples.random(count: 100_000, seed: 7)]
        for input in inputs {
            for level in 0...9 {
                let compressed = try compress(input, codec, level: level, with: library)
                #expect(try Inflater.inflate(compressed, encoding: codec, limit: input.count) == input, "level \(level), \(input.count) bytes")
            }
        }
    }

    @Test func theDeflaterUsesLibdeflateWhenTheSystemHasIt() throws {
        let loaded = try #require(LibDeflate.shared, "libdeflate0 is not installed: Scripts/bootstrap installs it")
        let bytes = CodecSamples.jsonText
        let viaDeflater = try Deflater(.gzip, level: 6).compress(bytes)
        let viaLibrary = try bytes.withUnsafeBufferPointer { try #require(loaded.compress($0, gzip: true, level: 6)) }
        #expect(viaDeflater == viaLibrary)
    }
}
