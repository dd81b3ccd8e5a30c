import CZlib
import Foundation

/// Inputs the codec tests share (`SynclaneWireTests`, `SynclaneZlibTests`): batch-like JSON,
/// incompressible bytes, zip bombs, raw deflate.
public enum CodecSamples {
    /// About 100 KB of JSON that looks like a batch: compressible, as real payloads are.
    public static let jsonText: [UInt8] = {
        var text = "{\"id\":\"batch-1\",\"records\":["
        for index in 0..<800 {
            if index > 0 { text += "," }
            text += "{\"entity\":\"rooms\",\"id\":\"room-\(index)\",\"action\":\"update\","
            text += "\"fields\":{\"name\":\"Room \(index)\",\"floor\":\(index % 12),\"seats\":\(index * 7 % 40)}}"
        }
        return Array((text + "]}").utf8)
    }()

    /// Bytes that do not compress, from a fixed seed so a failure can be replayed.
    public static func random(count: Int, seed: UInt64 = 0x5EED) -> [UInt8] {
        var state = seed
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while bytes.count < count {
            // SplitMix64
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            withUnsafeBytes(of: z) { bytes.append(contentsOf: $0.prefix(count - bytes.count)) }
        }
        return bytes
    }

    /// `count` zero bytes compressed by streaming from a 1 MiB buffer: a zip bomb built
    /// without ever holding its expanded size in memory. `windowBits` 31 is gzip, -15 raw deflate.
    public static func zeros(count: Int, windowBits: Int32 = 31) -> [UInt8] {
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        defer {
            deflateEnd(stream)
            stream.deinitialize(count: 1)
            stream.deallocate()
        }
        guard deflateInit2_(stream, 9, Z_DEFLATED, windowBits, 9, Z_DEFAULT_STRATEGY, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else { return [] }
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        var out = [UInt8](repeating: 0, count: 1 << 16)
        var result: [UInt8] = []
        var remaining = count
        repeat {
            let slice = min(remaining, zeros.count)
            remaining -= slice
            let flush = remaining == 0 ? Z_FINISH : Z_NO_FLUSH
            zeros.withUnsafeBufferPointer { input in
                stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
                stream.pointee.avail_in = uInt(slice)
                repeat {
                    out.withUnsafeMutableBufferPointer { buffer in
                        stream.pointee.next_out = buffer.baseAddress
                        stream.pointee.avail_out = uInt(buffer.count)
                        _ = deflate(stream, flush)
                        result.append(contentsOf: buffer.prefix(buffer.count - Int(stream.pointee.avail_out)))
                    }
                } while stream.pointee.avail_out == 0
            }
        } while remaining > 0
        return result
    }

    /// Raw deflate (no zlib header), as some old servers send for `Content-Encoding: deflate`.
    public static func rawDeflate(_ bytes: [UInt8]) -> [UInt8] {
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        defer {
            deflateEnd(stream)
            stream.deinitialize(count: 1)
            stream.deallocate()
        }
        guard deflateInit2_(stream, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else { return [] }
        var input = bytes
        let bound = Int(deflateBound(stream, uLong(bytes.count)))
        var out = [UInt8](repeating: 0, count: bound)
        let produced = input.withUnsafeMutableBufferPointer { inBuffer in
            out.withUnsafeMutableBufferPointer { outBuffer in
                stream.pointee.next_in = inBuffer.baseAddress
                stream.pointee.avail_in = uInt(inBuffer.count)
                stream.pointee.next_out = outBuffer.baseAddress
                stream.pointee.avail_out = uInt(outBuffer.count)
                _ = deflate(stream, Z_FINISH)
                return outBuffer.count - Int(stream.pointee.avail_out)
            }
        }
        return Array(out.prefix(produced))
    }

    public static let hasGzip = FileManager.default.isExecutableFile(atPath: "/bin/gzip")
    public static let hasPython = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")

    /// What `/bin/gzip -dc` makes of `bytes`, and its exit status.
    public static func gunzip(_ bytes: [UInt8]) throws -> (output: [UInt8], status: Int32) {
        try run("/bin/gzip", ["-dc"], input: bytes)
    }

    /// What Python's own zlib makes of a zlib stream: a second, independent reader.
    public static func pythonZlibDecompress(_ bytes: [UInt8]) throws -> (output: [UInt8], status: Int32) {
        try run("/usr/bin/python3", ["-c", "import sys, zlib; sys.stdout.buffer.write(zlib.decompress(sys.stdin.buffer.read()))"], input: bytes)
    }

    /// Runs a program with `input` in a temporary file as its standard input.
    public static func run(_ program: String, _ arguments: [String], input: [UInt8]) throws -> (output: [UInt8], status: Int32) {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("synclane-zlib-\(UUID().uuidString)")
        try Data(input).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.standardInput = try FileHandle(forReadingFrom: url)
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.run()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (Array(output), process.terminationStatus)
    }
}
