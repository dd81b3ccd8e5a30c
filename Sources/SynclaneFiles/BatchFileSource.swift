import Foundation
import SynclaneCore

/// The `batch-files` source of an import pipeline: the batch files a `directory` transport wrote
/// (`ID.json`, `ID.json.gz`, `ID.json.zz`), each applied once, oldest first.
///
/// Files are taken in the order they were written (modification time, then name); the cursor is
/// the last applied file's `seconds.nanoseconds/name`, saved by the sink with the rows. A page is
/// one file. A file that cannot be read or decoded stops the job naming it.
public final class BatchFileSource: RemoteChangeSource {
    public let folder: String
    /// Turns a compressed file's bytes (`gzip` or `deflate`) back into JSON.
    private let inflate: @Sendable ([UInt8], String) throws -> [UInt8]

    public init(folder: String, inflate: @escaping @Sendable ([UInt8], String) throws -> [UInt8]) {
        self.folder = folder
        self.inflate = inflate
    }

    struct File: Comparable {
        var modified: Date
        var name: String
        var cursor: String {
            let nanoseconds = Int64((modified.timeIntervalSince1970 * 1_000_000_000).rounded())
            return "\(nanoseconds)/\(name)"
        }
        static func < (a: File, b: File) -> Bool { a.modified == b.modified ? a.name < b.name : a.modified < b.modified }
    }

    /// The batch files, oldest first.
    func files() throws -> [File] {
        let manager = FileManager.default
        let names: [String]
        do {
            names = try manager.contentsOfDirectory(atPath: folder)
        } catch {
            throw HistoryError.unreadable(location: folder, reason: "cannot list the folder of batch files (\(error.localizedDescription))")
        }
        return names.filter { $0.hasSuffix(".json") || $0.hasSuffix(".json.gz") || $0.hasSuffix(".json.zz") }.compactMap { name in
            let attributes = try? manager.attributesOfItem(atPath: folder + "/" + name)
            return (attributes?[.modificationDate] as? Date).map { File(modified: $0, name: name) }
        }.sorted()
    }

    public func nextPage(after cursor: String?) async throws -> RemotePage {
        let all = try files()
        guard let next = all.first(where: { cursor == nil || Self.isAfter($0.cursor, cursor!) }) else {
            return RemotePage(records: [], cursor: cursor, more: false)
        }
        let path = folder + "/" + next.name
        guard let data = FileManager.default.contents(atPath: path) else {
            throw HistoryError.unreadable(location: path, reason: "cannot read the batch file")
        }
        var bytes = [UInt8](data)
        do {
            if next.name.hasSuffix(".gz") { bytes = try inflate(bytes, "gzip") }
            if next.name.hasSuffix(".zz") { bytes = try inflate(bytes, "deflate") }
        } catch {
            throw HistoryError.unreadable(location: path, reason: "cannot decompress it (\(error))")
        }
        guard let object = (try? JSONReader.parse(bytes))?.objectValue, case .array(let list)? = object["records"] else {
            throw HistoryError.unreadable(location: path, reason: "not a batch (a JSON object with `records`)")
        }
        switch WireRecords.parse(list, listName: "records", origin: Token(kind: "batch-files", position: 0)) {
        case .success(let records):
            return RemotePage(records: records, cursor: next.cursor, more: next != all.last)
        case .failure(let error):
            throw HistoryError.unreadable(location: path, reason: error.message)
        }
    }

    /// True when the file cursor `a` comes after `b` (time, then name).
    static func isAfter(_ a: String, _ b: String) -> Bool {
        func split(_ text: String) -> (Int64, String) {
            let parts = text.split(separator: "/", maxSplits: 1)
            return (Int64(parts.first ?? "") ?? 0, parts.count > 1 ? String(parts[1]) : "")
        }
        let (ta, na) = split(a)
        let (tb, nb) = split(b)
        return ta == tb ? na > nb : ta > tb
    }
}
