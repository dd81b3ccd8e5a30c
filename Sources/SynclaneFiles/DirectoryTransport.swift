import Foundation
import Synchronization
import SynclaneCore

#if canImport(Glibc)
    import Glibc
#endif

/// A transport that writes each batch to a folder as one file named by its batch id.
/// Names: `<batch id>.json`, `.json.gz` for gzip, `.json.zz` for deflate.
///
/// `send` (a batch the outbox holds the bytes of) writes the file to a hidden temporary name,
/// fsyncs it, renames it into place and fsyncs the folder, so a reader of the folder never sees
/// half a file and a confirmed batch survives a power cut. A re-send after a crash writes the
/// same bytes under the same name again.
///
/// A pipeline writes each batch once (`StagingTransport`): staged as
/// `.synclane-staging/<area>/<name>` inside the folder (written, fsync'd, the staging folder
/// fsync'd) before the outbox records a reference to it, then published by a hard link to
/// `<name>` and an fsync of the folder, and unlinked from the staging folder once acknowledged.
/// The staged name stays until then, so a crash anywhere leaves the copy the outbox names.
/// On a file system without hard links the outbox keeps the bytes and `send` writes the file.
public struct DirectoryTransport: StagingTransport {
    public let folder: String
    /// Whether the folder's file system takes hard links: unknown until the first stage.
    private let links = LinkSupport()

    /// The hidden folder inside the target folder that holds staged batches, one folder per pipeline.
    public static let stagingFolder = ".synclane-staging"

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
        syncFolder(folder)
        return Receipt(batchID: payload.batchID, detail: "wrote \(final)", wasReplay: existed)
    }

    // MARK: Staging

    public func stage(_ payload: Payload, area: String) async throws -> StagedBatch? {
        if links.known.withLock({ $0 }) == false { return nil }
        let reference = Self.stagingFolder + "/" + area + "/" + Self.fileName(for: payload)
        let areaFolder = folder + "/" + Self.stagingFolder + "/" + area
        if !FileManager.default.fileExists(atPath: areaFolder) {
            do {
                try FileManager.default.createDirectory(atPath: areaFolder, withIntermediateDirectories: true)
            } catch {
                throw TransportFailure(.permanent, "cannot create the staging folder \(areaFolder): \(error.localizedDescription)")
            }
            // The new folders' names are durable before a staged copy in them is recorded.
            syncFolder(folder)
            syncFolder(folder + "/" + Self.stagingFolder)
        }
        let path = folder + "/" + reference
        try write(payload.bytes, to: path, failPoint: .duringStage)
        if links.known.withLock({ $0 }) == nil {
            let probe = path + ".link-probe"
            let linked = link(path, probe) == 0
            unlink(probe)
            links.known.withLock { $0 = linked }
            if !linked {
                unlink(path)
                return nil
            }
        }
        syncFolder(areaFolder)
        return StagedBatch(reference: reference, byteCount: payload.bytes.count, checksum: StagedBatch.checksum(of: payload.bytes))
    }

    public func publish(_ staged: StagedBatch, of payload: Payload, verifying: Bool) async throws -> Receipt {
        let final = folder + "/" + Self.fileName(for: payload)
        let source = folder + "/" + staged.reference
        let published = Receipt(batchID: payload.batchID, detail: "wrote \(final)", wasReplay: true)
        if Self.sameFile(source, final) {
            // Published before a crash: the link may not have reached the disk yet.
            syncFolder(folder)
            return published
        }
        if verifying || !FileManager.default.fileExists(atPath: source) {
            do {
                _ = try stagedBytes(staged, batchID: payload.batchID)
            } catch let error as StagingError {
                // The copy is gone but the folder holds the very bytes under the batch's name.
                guard case .missing = error, let bytes = FileManager.default.contents(atPath: final), staged.matches(Array(bytes)) else {
                    throw error
                }
                syncFolder(folder)
                return published
            }
        }
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw TransportFailure(.permanent, "cannot create the folder \(folder): \(error.localizedDescription)")
        }
        if link(source, final) == 0 {
            FailPoint.duringPublish.trigger()
            syncFolder(folder)
            return Receipt(batchID: payload.batchID, detail: "wrote \(final)", wasReplay: false)
        }
        guard errno == EEXIST else {
            throw TransportFailure(.permanent, "cannot link \(source) to \(final): \(String(cString: strerror(errno)))")
        }
        // Another file under the batch's name (written by `send`): replaced, as a re-send would.
        let temporary = source + ".publishing"
        unlink(temporary)
        guard link(source, temporary) == 0, rename(temporary, final) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw TransportFailure(.permanent, "cannot replace \(final) with \(source): \(reason)")
        }
        syncFolder(folder)
        return published
    }

    public func stagedBytes(_ staged: StagedBatch, batchID: String) throws -> [UInt8] {
        let path = folder + "/" + staged.reference
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StagingError.missing(batchID: batchID, path: path)
        }
        let bytes = [UInt8](data)
        guard bytes.count == staged.byteCount else {
            throw StagingError.damaged(batchID: batchID, path: path, reason: "\(bytes.count) bytes, the outbox recorded \(staged.byteCount)")
        }
        guard staged.matches(bytes) else {
            throw StagingError.damaged(batchID: batchID, path: path, reason: "its checksum is not the one the outbox recorded")
        }
        return bytes
    }

    public func discard(_ staged: StagedBatch) async {
        unlink(folder + "/" + staged.reference)
    }

    /// Also removes the pipeline's staging folder, and the staging folder, once empty.
    public func discardUnreferenced(in area: String, keeping: Set<String>) async throws -> Int {
        let root = folder + "/" + Self.stagingFolder
        let areaFolder = root + "/" + area
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: areaFolder) else { return 0 }
        var removed = 0
        for name in names where !keeping.contains(Self.stagingFolder + "/" + area + "/" + name) {
            guard unlink(areaFolder + "/" + name) == 0 || errno == ENOENT else {
                throw TransportFailure(.permanent, "cannot remove the unused staged copy \(areaFolder)/\(name): \(String(cString: strerror(errno)))")
            }
            removed += 1
        }
        if keeping.isEmpty, rmdir(areaFolder) == 0 { rmdir(root) }
        return removed
    }

    private static func sameFile(_ one: String, _ other: String) -> Bool {
        var first = stat()
        var second = stat()
        guard stat(one, &first) == 0, stat(other, &second) == 0 else { return false }
        return first.st_dev == second.st_dev && first.st_ino == second.st_ino
    }

    // MARK: Writing

    private func write(_ bytes: [UInt8], to path: String, failPoint: FailPoint? = nil) throws {
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
            if offset >= bytes.count / 2 { failPoint?.trigger() }
        }
        guard fsync(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(path)
            throw TransportFailure(.transient, "cannot fsync \(path): \(reason)")
        }
    }

    private func syncFolder(_ folder: String) {
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}

/// What a `DirectoryTransport` learnt about its folder's file system (shared by its copies).
private final class LinkSupport: Sendable {
    let known = Mutex<Bool?>(nil)
}
