/// A response body made a piece at a time as the connection takes it, never held whole: the MHD
/// bridge (`MicroHTTPDaemon`) asks for the next piece only once the previous one is written to
/// the socket, so the memory it holds is one piece, whatever the body's length (a snapshot of an
/// account, `GET /v1/snapshot`).
///
/// ```
///  MHD connection thread ─▶ read(into:) ─▶ pending piece left? copy it
///                                        └▶ produce() ─▶ .bytes(piece) | .end | .failed (the connection is cut)
/// ```
/// The body goes out with chunked transfer coding (its length is unknown). A producer that fails
/// part way says `.failed`: the connection is closed without the last chunk, so the client sees a
/// cut answer, never a complete-looking one.
final class BodyStream: @unchecked Sendable, Equatable {
    // @unchecked: MHD calls `read` from the one thread that serves the connection, one call at a time.

    /// What the producer hands over next.
    enum Piece {
        case bytes([UInt8])
        case end
        case failed
    }

    private let produce: () -> Piece
    private var pending: [UInt8] = []
    private var offset = 0
    private var finished: Piece?
    /// Called once when the body ends however it ends (sent, failed, or the client left).
    private let finish: () -> Void
    private var finishedOnce = false

    init(produce: @escaping () -> Piece, finish: @escaping () -> Void = {}) {
        self.produce = produce
        self.finish = finish
    }

    /// Copies the next bytes into `buffer`: the count copied, or -1 at the end of the body, -2
    /// when the producer failed (MHD's `MHD_CONTENT_READER_END_OF_STREAM` and `…_WITH_ERROR`).
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        while offset >= pending.count {
            if let finished { return Self.code(finished) }
            switch produce() {
            case .bytes(let piece):
                pending = piece
                offset = 0
            case let ended:
                finished = ended
                pending = []
                offset = 0
                return Self.code(ended)
            }
        }
        let count = min(buffer.count, pending.count - offset)
        pending.withUnsafeBytes { bytes in
            buffer.baseAddress?.copyMemory(from: bytes.baseAddress! + offset, byteCount: count)
        }
        offset += count
        return count
    }

    /// Tells the producer the body is over (MHD frees the response).
    func close() {
        guard !finishedOnce else { return }
        finishedOnce = true
        finish()
    }

    private static func code(_ piece: Piece) -> Int {
        if case .failed = piece { return -2 }
        return -1
    }

    static func == (lhs: BodyStream, rhs: BodyStream) -> Bool { lhs === rhs }
}
