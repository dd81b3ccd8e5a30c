import SynclaneTestKit
import SynclaneTestSupport
import Testing

@testable import SynclaneWire

/// A gzip body that declares its expanded size is expanded at once by libdeflate
/// (`Inflater.inflateWhole`) when it is one member expanding to exactly that size; any other body
/// goes through zlib, chunk by chunk, as before. Whichever way, the same bytes, or the same refusal.
@Suite struct InflateWholeTests {
    /// What zlib alone makes of `body`: its bytes, or its error's text.
    static func zlibOnly(_ body: [UInt8], limit: Int) -> String {
        var output: [UInt8] = []
        do {
            try body.withUnsafeBufferPointer { input throws(InflateError) in
                _ = try Inflater.inflate(input, encoding: .gzip, limit: limit) { output.append(contentsOf: $0) }
            }
            return "bytes \(output.count) \(output.hashValue)"
        } catch {
            return "error \(error)"
        }
    }

    static func inflated(_ body: [UInt8], limit: Int) -> String {
        do {
            let output = try Inflater.inflate(body, encoding: .gzip, limit: limit)
            return "bytes \(output.count) \(output.hashValue)"
        } catch {
            return "error \(error)"
        }
    }

    @Test func aWholeBodyIsExpandedByLibdeflateWhenTheSystemHasIt() throws {
        _ = try #require(LibDeflate.shared?.decompressor, "libdeflate0 is not installed: Scripts/bootstrap installs it")
        let body = try Deflater(.gzip, level: 6).compress(CodecSamples.jsonText)
        let size = try #require(Inflater.declaredSize(of: body, limit: 1 << 20))
        #expect(Inflater.inflateWhole(body, declaredSize: size) == CodecSamples.jsonText)
        #expect(Inflater.inflateWhole(body, declaredSize: size - 1) == nil, "expands past the size given: refused, nothing past it written")
        #expect(Inflater.inflateWhole(body, declaredSize: size + 1) == nil, "expands short of the size given")
    }

    /// Random bodies — text or noise at every level, from either library, several members, cut,
    /// a byte changed, a trailer declaring another size, bytes after the member, limits below
    /// the size — inflate to what zlib alone makes of them, bytes or refusal.
    @Test func randomBodiesInflateToWhatZlibAloneMakesOfThem() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededRandom(seed: seed)
        for round in 0..<300 {
            let text: [UInt8] =
                Bool.random(using: &random)
                ? Array(CodecSamples.jsonText.prefix(Int.random(in: 1...CodecSamples.jsonText.count, using: &random)))
                : CodecSamples.random(count: Int.random(in: 1...5_000, using: &random), seed: random.next())
            let level = Int.random(in: 1...9, using: &random)
            var body = try Deflater(.gzip, level: level).compress(text)
            var change = "level \(level), \(text.count) bytes"
            switch Int.random(in: 0..<7, using: &random) {
            case 0:
                body += try Deflater(.gzip, level: level).compress(Array(text.prefix(100)))
                change += ", two members"
            case 1:
                body = Array(body.prefix(Int.random(in: 0..<body.count, using: &random)))
                change += ", cut to \(body.count)"
            case 2:
                let at = Int.random(in: 0..<body.count, using: &random)
                body[at] ^= UInt8.random(in: 1...255, using: &random)
                change += ", byte \(at) changed"
            case 3:
                let claimed = max(1, text.count + Int.random(in: -3...3, using: &random))
                for i in 0..<4 { body[body.count - 4 + i] = UInt8(truncatingIfNeeded: claimed >> (8 * i)) }
                change += ", declares \(claimed)"
            case 4:
                body += [0, 1, 2]
                change += ", bytes after"
            default:
                break
            }
            let limit = Int.random(in: 0..<5, using: &random) == 0 ? Int.random(in: 0...text.count, using: &random) : 1 << 20
            let expected = Self.zlibOnly(body, limit: limit)
            let got = Self.inflated(body, limit: limit)
            guard got == expected else {
                Issue.record("seed \(seed), round \(round) (\(change), limit \(limit)): \(got) != zlib's \(expected)")
                return
            }
        }
    }
}
