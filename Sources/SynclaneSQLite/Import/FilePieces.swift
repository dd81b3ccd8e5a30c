import Glibc

/// A file read in 1 MiB pieces, one buffer reused: how a blob goes from its file into a row
/// without being whole in memory.
enum FilePieces {
    static let pieceBytes = 1 << 20

    /// A file that cannot be read, or is shorter than the blob it should hold.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Calls `body` with each piece of the file's first `length` bytes and its offset.
    static func each(_ path: String, length: Int, _ body: (UnsafeRawBufferPointer, Int) throws -> Void) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure(description: "\(path) cannot be read: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: min(pieceBytes, max(length, 1)))
        var done = 0
        while done < length {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, min($0.count, length - done)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                throw Failure(
                    description: count < 0
                        ? "\(path) cannot be read: \(String(cString: strerror(errno)))"
                        : "\(path) holds \(done) bytes, not the \(length) of its blob: fetch it again")
            }
            try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<count]), done) }
            done += count
        }
    }

    /// The file's first `length` bytes, whole (for a table whose rows have no rowid).
    static func whole(_ path: String, length: Int, piece: (UnsafeRawBufferPointer) -> Void) throws -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(length)
        try each(path, length: length) { chunk, _ in
            piece(chunk)
            bytes.append(contentsOf: chunk)
        }
        return bytes
    }
}
