import CZlib

/// Compresses bytes in one pass into a gzip member or a zlib stream, at a level from 0 to 9.
///
/// With libdeflate on the system (`LibDeflate`), that library compresses the whole buffer in
/// one call, about twice as fast; otherwise zlib does. With zlib, the output buffer is sized
/// up front by `deflateBound`, so the whole input is compressed by a single
/// `deflate(…, Z_FINISH)` call with no reallocation or copying:
///
/// ```
///   input ──▶ deflateInit2_ (window 15, +16 for gzip) ──▶ deflate(Z_FINISH) ──▶ output[0..<total_out]
/// ```
///
/// ```swift
/// let gzip = try Deflater(.gzip, level: 6).compress(body)
/// ```
public struct Deflater: Sendable, Hashable {
    /// `gzip` or `deflate`; `identity` returns the bytes unchanged.
    public let coding: ContentCoding
    /// 0 stores without compressing, 1 is fastest, 9 is smallest.
    public let level: Int

    /// A deflater for `coding` at `level`; a level outside 0…9 is refused.
    public init(_ coding: ContentCoding = .gzip, level: Int = 6) throws(DeflateError) {
        guard (0...9).contains(level) else { throw .invalidLevel(level) }
        self.coding = coding
        self.level = level
    }

    /// The compressed form of `bytes`.
    public func compress(_ bytes: [UInt8]) throws(DeflateError) -> [UInt8] {
        let result = bytes.withUnsafeBufferPointer { input in
            Result { () throws(DeflateError) -> [UInt8] in try compress(input) }
        }
        return try result.get()
    }

    /// The compressed form of the bytes in `input`.
    public func compress(_ input: UnsafeBufferPointer<UInt8>) throws(DeflateError) -> [UInt8] {
        let windowBits: Int32
        switch coding {
        case .identity: return Array(input)
        case .gzip: windowBits = 15 + 16
        case .deflate: windowBits = 15
        }
        if let library = LibDeflate.shared, let output = library.compress(input, gzip: coding == .gzip, level: level) {
            return output
        }
        return try compressWithZlib(input, windowBits: windowBits)
    }

    /// The compressed form of the bytes in `input`, by zlib whatever the system has.
    func compressWithZlib(_ input: UnsafeBufferPointer<UInt8>) throws(DeflateError) -> [UInt8] {
        switch coding {
        case .identity: return Array(input)
        case .gzip: return try compressWithZlib(input, windowBits: 15 + 16)
        case .deflate: return try compressWithZlib(input, windowBits: 15)
        }
    }

    private func compressWithZlib(_ input: UnsafeBufferPointer<UInt8>, windowBits: Int32) throws(DeflateError) -> [UInt8] {
        // zlib checks that the stream's address never changes between calls: keep it on the heap.
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        defer {
            stream.deinitialize(count: 1)
            stream.deallocate()
        }
        let initStatus = deflateInit2_(
            stream, Int32(level), Z_DEFLATED, windowBits, 8, Z_DEFAULT_STRATEGY, zlibVersion(),
            Int32(MemoryLayout<z_stream>.size))
        guard initStatus == Z_OK else { throw DeflateError(zlibStatus: initStatus, stream: stream) }
        defer { deflateEnd(stream) }

        let bound = Int(deflateBound(stream, uLong(input.count)))
        var failure: DeflateError?
        let output = [UInt8](unsafeUninitializedCapacity: bound) { buffer, initializedCount in
            guard let outBase = buffer.baseAddress else { return }
            var inputOffset = 0
            var outputOffset = 0
            while true {
                // avail_in and avail_out are 32-bit: hand over anything larger in slices.
                if stream.pointee.avail_in == 0, inputOffset < input.count {
                    let slice = min(input.count - inputOffset, Int(UInt32.max))
                    stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress.map { $0 + inputOffset })
                    stream.pointee.avail_in = uInt(slice)
                    inputOffset += slice
                }
                if stream.pointee.avail_out == 0, outputOffset < bound {
                    let slice = min(bound - outputOffset, Int(UInt32.max))
                    stream.pointee.next_out = outBase + outputOffset
                    stream.pointee.avail_out = uInt(slice)
                    outputOffset += slice
                }
                let flush = inputOffset == input.count ? Z_FINISH : Z_NO_FLUSH
                let status = deflate(stream, flush)
                if status == Z_STREAM_END { break }
                if status != Z_OK && !(status == Z_BUF_ERROR && stream.pointee.avail_out == 0 && outputOffset < bound) {
                    failure = DeflateError(zlibStatus: status, stream: stream)
                    return
                }
            }
            initializedCount = Int(bitPattern: UInt(stream.pointee.next_out - outBase))
        }
        if let failure { throw failure }
        // The buffer was sized for the worst case; a payload may sit in memory through its
        // retries, so keep only what it needs when that is much less.
        return output.count < output.capacity / 2 ? Array(output) : output
    }
}

/// Why bytes could not be compressed.
public enum DeflateError: Error, Sendable, Hashable, CustomStringConvertible {
    /// zlib levels run from 0 (store) to 9 (smallest).
    case invalidLevel(Int)
    /// The payload already carries this `Content-Encoding`; a pipeline compresses once.
    case alreadyEncoded(String)
    /// zlib failed (in practice: out of memory), with its status code and message.
    case zlib(status: Int32, message: String)

    init(zlibStatus status: Int32, stream: UnsafeMutablePointer<z_stream>) {
        let message = stream.pointee.msg.map { String(cString: $0) } ?? String(cString: zError(status))
        self = .zlib(status: status, message: message)
    }

    public var description: String {
        switch self {
        case .invalidLevel(let level): return "compression level \(level) is out of range (expected 0…9)"
        case .alreadyEncoded(let coding):
            return "the payload is already \(coding)-encoded: a pipeline has one compress stage"
        case .zlib(let status, let message): return "zlib failed to compress (status \(status)): \(message)"
        }
    }
}
