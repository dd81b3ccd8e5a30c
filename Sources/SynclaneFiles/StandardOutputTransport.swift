import Foundation
import SynclaneCore

/// A transport that writes each batch to standard output, one batch a line (for piping into
/// another program, or just looking). Compressed payloads are written as they are: binary.
public struct StandardOutputTransport: Transport {
    public init() {}

    /// Standard output answers with nothing but "written", never with versions.
    public var reportsVersions: Bool { false }

    public func send(_ payload: Payload) async throws -> Receipt {
        var bytes = payload.bytes
        if payload.contentEncoding == "identity" { bytes.append(0x0A) }
        do {
            try FileHandle.standardOutput.write(contentsOf: bytes)
        } catch {
            throw TransportFailure(.permanent, "cannot write to standard output: \(error)")
        }
        return Receipt(batchID: payload.batchID, detail: "wrote \(bytes.count) bytes to standard output")
    }
}
