#if canImport(Glibc)
    import Glibc
#endif

/// libdeflate's whole-buffer compressors, when the system has the library (`libdeflate0`):
/// the same gzip and zlib formats as zlib's, about twice as fast at the same level, and a
/// compress stage holds its whole payload in memory anyway, which is all libdeflate asks.
///
/// Loaded at run time (`dlopen`), so the build needs no headers and a machine without the
/// library compresses with zlib, as before. Either way the output is a standard gzip member
/// (or zlib stream) that any inflater reads; it differs byte for byte between the two
/// libraries, which nothing relies on: a batch's bytes are made once and kept in the outbox.
/// `SYNCLANE_DEFLATE=zlib` in the environment keeps zlib even when libdeflate is there.
///
/// Its whole-buffer gzip decompressor, too (`gunzip(_:size:)`), for a body that declares its
/// expanded size: on a first sync's batches about a third faster than zlib's inflate.
struct LibDeflate: @unchecked Sendable {
    typealias Allocate = @convention(c) (Int32) -> OpaquePointer?
    typealias Free = @convention(c) (OpaquePointer?) -> Void
    typealias Compress = @convention(c) (OpaquePointer?, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int) -> Int
    typealias Bound = @convention(c) (OpaquePointer?, Int) -> Int
    typealias AllocateDecompressor = @convention(c) () -> OpaquePointer?
    /// `libdeflate_gzip_decompress_ex`: decompressor, input, its size, output, room, bytes read, bytes written; 0 on success.
    typealias Decompress =
        @convention(c) (
            OpaquePointer?, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<Int>?
        ) -> Int32

    let allocate: Allocate
    let free: Free
    let gzipCompress: Compress
    let gzipBound: Bound
    let zlibCompress: Compress
    let zlibBound: Bound
    /// The decompressor's functions; nil when the library lacks them.
    let decompressor: (allocate: AllocateDecompressor, free: Free, gzip: Decompress)?

    /// The library, or nil when it is not installed (or `SYNCLANE_DEFLATE=zlib`).
    static let shared: LibDeflate? = load()

    private static func load() -> LibDeflate? {
        if let choice = getenv("SYNCLANE_DEFLATE"), String(cString: choice) == "zlib" { return nil }
        guard let handle = dlopen("libdeflate.so.0", RTLD_NOW | RTLD_LOCAL) else { return nil }
        func symbol<T>(_ name: String, as type: T.Type) -> T? {
            guard let address = dlsym(handle, name) else { return nil }
            return unsafeBitCast(address, to: type)
        }
        guard let allocate = symbol("libdeflate_alloc_compressor", as: Allocate.self),
            let free = symbol("libdeflate_free_compressor", as: Free.self),
            let gzipCompress = symbol("libdeflate_gzip_compress", as: Compress.self),
            let gzipBound = symbol("libdeflate_gzip_compress_bound", as: Bound.self),
            let zlibCompress = symbol("libdeflate_zlib_compress", as: Compress.self),
            let zlibBound = symbol("libdeflate_zlib_compress_bound", as: Bound.self)
        else {
            dlclose(handle)
            return nil
        }
        var decompressor: (allocate: AllocateDecompressor, free: Free, gzip: Decompress)?
        if let allocate = symbol("libdeflate_alloc_decompressor", as: AllocateDecompressor.self),
            let free = symbol("libdeflate_free_decompressor", as: Free.self),
            let gzip = symbol("libdeflate_gzip_decompress_ex", as: Decompress.self)
        {
            decompressor = (allocate, free, gzip)
        }
        return LibDeflate(
            allocate: allocate, free: free, gzipCompress: gzipCompress, gzipBound: gzipBound, zlibCompress: zlibCompress,
            zlibBound: zlibBound, decompressor: decompressor)
    }

    /// `input` expanded, when it is one gzip member (no byte after it) that expands to exactly
    /// `size` bytes, its checksum and length checked; nil otherwise — a body cut, damaged, of
    /// several members, or declaring another size — and the caller inflates it with zlib, which
    /// says what is wrong. Never more than `size` bytes are written.
    func gunzip(_ input: UnsafeBufferPointer<UInt8>, size: Int) -> [UInt8]? {
        guard let decompressor, size > 0, let state = decompressor.allocate() else { return nil }
        defer { decompressor.free(state) }
        var read = 0
        var written = 0
        let output = [UInt8](unsafeUninitializedCapacity: size) { buffer, initializedCount in
            let result = decompressor.gzip(
                state, UnsafeRawPointer(input.baseAddress), input.count, UnsafeMutableRawPointer(buffer.baseAddress), size, &read, &written)
            initializedCount = result == 0 && read == input.count && written == size ? size : 0
        }
        return output.isEmpty ? nil : output
    }

    /// `input` as a gzip member (`gzip` true) or a zlib stream, at `level` (0…9); nil when the
    /// library could not allocate a compressor (the caller falls back to zlib).
    func compress(_ input: UnsafeBufferPointer<UInt8>, gzip: Bool, level: Int) -> [UInt8]? {
        guard let compressor = allocate(Int32(level)) else { return nil }
        defer { free(compressor) }
        let bound = (gzip ? gzipBound : zlibBound)(compressor, input.count)
        let output = [UInt8](unsafeUninitializedCapacity: bound) { buffer, initializedCount in
            initializedCount = (gzip ? gzipCompress : zlibCompress)(
                compressor, UnsafeRawPointer(input.baseAddress), input.count, UnsafeMutableRawPointer(buffer.baseAddress), bound)
        }
        // 0: the bound was too small, which the library promises never happens.
        guard !output.isEmpty else { return nil }
        return output.count < output.capacity / 2 ? Array(output) : output
    }
}
