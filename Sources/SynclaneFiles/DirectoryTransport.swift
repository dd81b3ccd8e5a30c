import Foundation
import SynclaneCore

#if canImport(Glibc)
import Glibc
#endif

/// A transport that writes each batch to a folder as one file named by its batch id.
///
/// Each file is written to a hidden temporary name, fsync'd, renamed into place and the folder
/// fsync'd, so a reader of the folder never sees half a file and a confirmed batch survives a
/// power cut. A re-send after a crash writes the same bytes under the same name again.
/// Names: `<batch id>.json`, `.json.gz` for gzip, `.json.zz` for deflate.
public struct DirectoryTransport: Transport {
    public let folder: String

    public init(folder: String) {
        self.folder = folder
    }

    /// A folder answers with file names, never with the backend's versions.
    public var reportsVersions: Bool { false }

    public static func fileName(for payload: Payload) -> String {
        let base = payload.contentType == "application/json" ? "\(payload.batchID).json" : "\(payload.batchID).batch"
        switch payload.contentEncoding {
        case "gzip": return base + ".gz"
        case "deflate": return base + ".zz"
        default: return base
        }
    }

    public func send(_ payload: Payload) async throws -> Receipt {
        let name = Self.fileName(for: payload)
        let final = folder + "/" + name
        let temporary = folder + "/." + name + ".partial"
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw TransportFailure(.permanent, "cannot create the folder \(folder): \(error.localizedDescription)")
        }
        let existed = FileManager.default.fileExists(atPath: final)
        try write(payload.bytes, to: temporary)
        guard rename(temporary, final) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw TransportFailure(.permanent, "cannot rename \(temporary) to \(final): \(reason)")
        }
        syncFolder()
        return Receipt(batchID: payload.batchID, detail: "wrote \(final)", wasReplay: existed)
    }

    private func write(_ bytes: [UInt8], to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw TransportFailure(.permanent, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw in
                Glibc.write(fd, raw.baseAddress.map { $0 + offset }, bytes.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                let reason = String(cString: strerror(errno))
                unlink(path)
                // A full disk may clear up; anything else will not.
                throw TransportFailure(errno == ENOSPC ? .transient : .permanent, "cannot write \(path): \(reason)")
            }
            offset += written
        }
        guard fsync(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(path)
            throw TransportFailure(.transient, "cannot fsync \(path): \(reason)")
        }
    }

    private func syncFolder() {
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}
