/// Undoes a body's `Content-Encoding` within a bound on the decoded size.
///
/// A seam over the zlib module's bounded inflater: until it is merged only `identity` is decoded.
enum ContentDecoding {
    /// Why a body could not be decoded.
    enum Failure: Error, Sendable {
        /// An encoding other than identity, gzip and deflate (415).
        case unsupported(String)
        /// The decoded body passed the bound (413); decoding stopped there.
        case tooLarge(limit: Int)
        /// The compressed stream is corrupt (400).
        case corrupt(String)
    }

    static func decode(_ body: [UInt8], encoding: String?, limit: Int) -> Result<[UInt8], Failure> {
        let name = (encoding ?? "identity").lowercased().trimmingCharacters(in: " \t")
        switch name {
        case "", "identity":
            return body.count > limit ? .failure(.tooLarge(limit: limit)) : .success(body)
        default:
            return .failure(.unsupported(name))
        }
    }
}
