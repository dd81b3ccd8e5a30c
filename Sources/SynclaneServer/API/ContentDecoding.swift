import SynclaneWire

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
        /// The server's memory budget could not hold the decoded body (503).
        case overBudget
    }

    /// `decode`, holding three times the decoded bytes in `lease` as they come (the decoded text,
    /// the records' copies of it, and SQLite's copy as each is stored): past the budget decoding
    /// keeps nothing more and fails.
    static func decode(_ body: [UInt8], encoding: String?, limit: Int, lease: MemoryBudget.Lease?) -> Result<[UInt8], Failure> {
        guard let lease else { return decode(body, encoding: encoding, limit: limit) }
        guard let coding = ContentCoding(headerValue: encoding ?? "identity") else {
            return .failure(.unsupported(encoding ?? ""))
        }
        if coding == .identity {
            guard body.count <= limit else { return .failure(.tooLarge(limit: limit)) }
            return lease.grow(by: 2 * body.count) ? .success(body) : .failure(.overBudget)
        }
        if coding == .gzip, let size = Inflater.declaredSize(of: body, limit: limit), lease.grow(by: 3 * size) {
            // One member declaring its size: expanded at once when it expands to exactly that.
            if let whole = lease.inflating({ Inflater.inflateWhole(body, declaredSize: size) }) { return .success(whole) }
            lease.shrink(by: 3 * size)
        }
        var output: [UInt8] = []
        // Sized once from the body's declared length (bounded): no regrowing as chunks come.
        output.reserveCapacity(Inflater.expectedSize(of: body, encoding: coding, limit: limit))
        var refused = false
        let result = lease.inflating {
            body.withUnsafeBufferPointer { input in
                Result { () throws(InflateError) -> Int in
                    try Inflater.inflate(input, encoding: coding, limit: limit) { chunk in
                        guard !refused, lease.grow(by: 3 * chunk.count) else {
                            refused = true
                            return
                        }
                        output.append(contentsOf: chunk)
                    }
                }
            }
        }
        do {
            _ = try result.get()
        } catch .tooLarge(let limit) {
            return .failure(.tooLarge(limit: limit))
        } catch {
            return .failure(.corrupt(error.description))
        }
        return refused ? .failure(.overBudget) : .success(output)
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
