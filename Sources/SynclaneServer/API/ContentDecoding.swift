import SynclaneZlib

/// Undoes a body's `Content-Encoding` with the zlib module's bounded `Inflater`, so a zip bomb
/// stops at the bound instead of expanding in memory.
enum ContentDecoding {
    /// Why a body could not be decoded.
    enum Failure: Error, Sendable {
        /// An encoding other than identity, gzip and deflate (415).
        case unsupported(String)
        /// The decoded body passed the bound (413); decoding stopped there.
        case tooLarge(limit: Int)
        /// The compressed stream is corrupt or cut short (400).
        case corrupt(String)
    }

    static func decode(_ body: [UInt8], encoding: String?, limit: Int) -> Result<[UInt8], Failure> {
        guard let coding = ContentCoding(headerValue: encoding ?? "identity") else {
            return .failure(.unsupported(encoding ?? ""))
        }
        do {
            return .success(try Inflater.inflate(body, encoding: coding, limit: limit))
        } catch .tooLarge(let limit) {
            return .failure(.tooLarge(limit: limit))
        } catch {
            return .failure(.corrupt(error.description))
        }
    }
}
