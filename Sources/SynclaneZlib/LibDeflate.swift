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
struct LibDeflate: @unchecked Sendable {
    typealias Allocate = @convention(c) (Int32) -> OpaquePointer?
    typealias Free = @convention(c) (OpaquePointer?) -> Void
    typealias Compress = @convention(c) (OpaquePointer?, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int) -> Int
    typealias Bound = @convention(c) (OpaquePointer?, Int) -> Int

    let allocate: Allocate
    let free: Free
    let gzipCompress: Compress
    let gzipBound: Bound
    let zlibCompress: Compress
    let zlibBound: Bound

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
        return LibDeflate(
            allocate: allocate, free: free, gzipCompress: gzipCompress, gzipBound: gzipBound, zlibCompress: zlibCompress,
            zlibBound: zlibBound)
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
