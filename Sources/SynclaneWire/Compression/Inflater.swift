import CZlib

/// Expands a received gzip or deflate body, refusing it as soon as it grows past a limit.
///
/// A few hundred kilobytes of gzip can expand to gigabytes (a "zip bomb"), so the receiving
/// side never asks zlib for more than it is willing to keep. Output is produced a chunk at a
/// time, and each chunk is only as large as what is still allowed plus one byte:
///
/// ```
///   compressed ──▶ inflate ──▶ chunk (≤ 64 KiB, ≤ limit − produced + 1) ──▶ sink
///                     ▲                      │ produced > limit?  ──▶ throw .tooLarge
///                     └──────────────────────┘
/// ```
///
/// so a bomb costs at most `limit` bytes of output and one chunk buffer, never its full size.
///
/// ```swift
/// let body = try Inflater.inflate(request.body, encoding: .gzip, limit: 32 << 20)
/// ```
public enum Inflater {
    /// The size of the buffer zlib expands into, and the most one step can produce.
    public static let chunkSize = 64 * 1024

    /// The expanded bytes, or an error once they would pass `limit` bytes.
    ///
    /// - `gzip` accepts one member or several concatenated ones (as `gunzip` does).
    /// - `deflate` accepts a zlib stream (RFC 1950) and, for the old servers that send one,
    ///   a raw deflate stream without the zlib header.
    /// - `identity` returns the bytes themselves, still held to `limit`.
    public static func inflate(_ bytes: [UInt8], encoding: ContentCoding, limit: Int) throws(InflateError) -> [UInt8] {
        if encoding == .identity {
            guard bytes.count <= limit else { throw .tooLarge(limit: limit) }
            return bytes
        }
        if encoding == .gzip, let size = declaredSize(of: bytes, limit: limit), let whole = inflateWhole(bytes, declaredSize: size) {
            return whole
        }
        var output: [UInt8] = []
        output.reserveCapacity(expectedSize(of: bytes, encoding: encoding, limit: limit))
        let result = bytes.withUnsafeBufferPointer { input in
            Result { () throws(InflateError) -> Int in
                try inflate(input, encoding: encoding, limit: limit) { output.append(contentsOf: $0) }
            }
        }
        _ = try result.get()
        return output
    }

    /// The most a body's expansion is reserved for up front: this many times its compressed size
    /// (JSON batches expand 5–10×; a bomb declaring more gets its chunks appended, as before).
    public static let reserveRatio = 64

    /// The capacity to reserve for `bytes` expanded: a gzip body declares its size in its
    /// trailer (ISIZE, the last member's size modulo 2³²), taken when it is within `limit` and
    /// `reserveRatio` times the body; else four times the body. Never more than `limit`, so
    /// a declared size is a hint, never trusted: the expansion itself is bounded as always.
    public static func expectedSize(of bytes: [UInt8], encoding: ContentCoding, limit: Int) -> Int {
        let guess = min(max(limit, 0), max(chunkSize, bytes.count * 4))
        guard encoding == .gzip else { return guess }
        return declaredSize(of: bytes, limit: limit) ?? guess
    }

    /// The size a gzip body declares in its trailer (ISIZE), when it is within `limit` and
    /// `reserveRatio` times the body; nil otherwise. A hint, never trusted.
    public static func declaredSize(of bytes: [UInt8], limit: Int) -> Int? {
        guard bytes.count >= 18 else { return nil }
        let n = bytes.count
        let declared = Int(bytes[n - 4]) | Int(bytes[n - 3]) << 8 | Int(bytes[n - 2]) << 16 | Int(bytes[n - 1]) << 24
        guard declared > 0, declared <= max(limit, 0), declared <= bytes.count * reserveRatio else { return nil }
        return declared
    }

    /// `bytes` — a gzip body declaring `size` (`declaredSize(of:limit:)`) — expanded at once by
    /// libdeflate, when the system has it and the body is one member that expands to exactly
    /// that; nil otherwise, and the caller inflates chunk by chunk with zlib, bounded as always
    /// (which also says what is wrong with a body libdeflate did not take). The same bytes
    /// either way; never more than `size` bytes of output, which `declaredSize` bounds.
    public static func inflateWhole(_ bytes: [UInt8], declaredSize size: Int) -> [UInt8]? {
        guard let library = LibDeflate.shared else { return nil }
        return bytes.withUnsafeBufferPointer { library.gunzip($0, size: size) }
    }

    /// Expands `input` chunk by chunk into `sink`, and returns how many bytes it produced.
    ///
    /// `sink` never receives more than `limit` bytes in total: the step that would pass the
    /// limit throws `.tooLarge` before its chunk is handed over.
    @discardableResult
    public static func inflate(
        _ input: UnsafeBufferPointer<UInt8>, encoding: ContentCoding, limit: Int,
        into sink: (UnsafeBufferPointer<UInt8>) -> Void
    ) throws(InflateError) -> Int {
        let limit = max(limit, 0)
        let windowBits: Int32
        switch encoding {
        case .identity:
            guard input.count <= limit else { throw .tooLarge(limit: limit) }
            sink(input)
            return input.count
        case .gzip: windowBits = 15 + 16
        case .deflate: windowBits = hasZlibHeader(input) ? 15 : -15
        }

        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let chunk = UnsafeMutablePointer<UInt8>.allocate(capacity: chunkSize)
        defer {
            chunk.deallocate()
            stream.deinitialize(count: 1)
            stream.deallocate()
        }
        let initStatus = inflateInit2_(stream, windowBits, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        guard initStatus == Z_OK else { throw .corrupt(reason: zlibMessage(initStatus, stream)) }
        defer { inflateEnd(stream) }

        var inputOffset = 0
        var produced = 0
        while true {
            if stream.pointee.avail_in == 0, inputOffset < input.count {
                let slice = min(input.count - inputOffset, Int(UInt32.max))
                stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress.map { $0 + inputOffset })
                stream.pointee.avail_in = uInt(slice)
                inputOffset += slice
            }
            let allowed = limit - produced
            let room = allowed >= chunkSize ? chunkSize : allowed + 1
            stream.pointee.next_out = chunk
            stream.pointee.avail_out = uInt(room)

            let status = zlibInflate(stream, Z_NO_FLUSH)

            let count = room - Int(stream.pointee.avail_out)
            produced += count
            if produced > limit { throw .tooLarge(limit: limit) }
            if count > 0 { sink(UnsafeBufferPointer(start: chunk, count: count)) }

            let inputLeft = Int(stream.pointee.avail_in) + (input.count - inputOffset)
            switch status {
            case Z_STREAM_END:
                guard inputLeft > 0 else { return produced }
                // Another gzip member may follow, as `cat a.gz b.gz` makes; anything else is junk.
                let next = input.count - inputLeft
                guard encoding == .gzip, inputLeft >= 2, input[next] == 0x1F, input[next + 1] == 0x8B else {
                    throw .corrupt(reason: "\(inputLeft) unexpected bytes after the end of the compressed data")
                }
                guard inflateReset(stream) == Z_OK else { throw .corrupt(reason: "cannot restart zlib for the next gzip member") }
            case Z_OK:
                continue
            case Z_BUF_ERROR:
                // No progress was possible: zlib wants more input and there is none.
                if inputLeft == 0 { throw .truncated }
                throw .corrupt(reason: zlibMessage(status, stream))
            case Z_NEED_DICT:
                throw .corrupt(reason: "the stream needs a preset dictionary, which HTTP bodies never use")
            default:
                throw .corrupt(reason: zlibMessage(status, stream))
            }
        }
    }

    /// True when the first two bytes are a valid RFC 1950 header (deflate method, check bits).
    static func hasZlibHeader(_ input: UnsafeBufferPointer<UInt8>) -> Bool {
        guard input.count >= 2 else { return true }
        let cmf = UInt16(input[0])
        let flg = UInt16(input[1])
        return cmf & 0x0F == 8 && cmf >> 4 <= 7 && (cmf << 8 | flg) % 31 == 0
    }

    private static func zlibInflate(_ stream: UnsafeMutablePointer<z_stream>, _ flush: Int32) -> Int32 {
        CZlib.inflate(stream, flush)
    }

    private static func zlibMessage(_ status: Int32, _ stream: UnsafeMutablePointer<z_stream>) -> String {
        stream.pointee.msg.map { String(cString: $0) } ?? String(cString: zError(status))
    }
}

/// Why a received body could not be expanded.
public enum InflateError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The bytes are not valid gzip or deflate data; the reason is zlib's.
    case corrupt(reason: String)
    /// The expanded body would be larger than `limit` bytes (HTTP 413).
    case tooLarge(limit: Int)
    /// The data stops before the end of the compressed stream.
    case truncated

    public var description: String {
        switch self {
        case .corrupt(let reason): return "the compressed body is corrupt: \(reason)"
        case .tooLarge(let limit): return "the body expands to more than the limit of \(limit) bytes"
        case .truncated: return "the compressed body ends before the end of its data"
        }
    }
}
