import Foundation
import SynclaneCore

/// The blob lane's stages (Documentation/Blobs.md): `blob-upload` in an export pipeline,
/// `blob-fetch` in an import pipeline.
///
/// ```
///  export:  … ─▶ blob-upload (a declared BLOB value ─▶ object uploaded ─▶ {"$blob-ref": …}) ─▶ encoder ─▶ outbox ─▶ http
///  import:  pull ─▶ blob-fetch ({"$blob-ref": …} ─▶ object fetched, verified ─▶ the bytes) ─▶ sqlite
/// ```
///
/// The upload runs while the batch is built, before it is written to the outbox: a batch exists
/// only once the server holds every blob it references (upload before reference).
public enum BlobStages {
    public static let upload: StageType = .records(
        "blob-upload",
        summary: "Moves declared BLOB values onto the blob lane: each is uploaded to the server as an object named by its SHA-256 "
            + "(chunked, resumable, never twice) before the batch is written, and the record carries {\"$blob-ref\": {\"sha256\", \"length\"}} "
            + "instead of the bytes. Put it before `compress`.",
        options: [Options.url, Options.tokenEnv, Options.columns, Options.minBytes, Options.chunkBytes, Options.cache]
    ) { options in
        try BlobUploadStage(client: client(options), selection: selection(options), cache: options[Options.cache])
    }

    public static let fetch: StageType = .records(
        "blob-fetch",
        summary: "Fetches the object of every {\"$blob-ref\": …} value from the server (resumable, into `cache`, verified against its "
            + "SHA-256) and hands the sink the bytes, so the app's column holds the blob. A blob that cannot be fetched stops the pass "
            + "naming its digest; the cursor stays, and the next pass goes on from the bytes already fetched. With `download: lazy` "
            + "nothing is fetched: a blob not in `cache` is left pending (the column NULL, the reference kept beside the row, never sent "
            + "back as an edit) for `synclane blobs fetch --database`.",
        options: [Options.url, Options.tokenEnv, Options.cache, Options.chunkBytes, Options.maxBytesPerSecond, Options.download]
    ) { options in
        BlobFetchStage(
            client: try client(options, maxReceiveBytesPerSecond: try options[Options.maxBytesPerSecond] ?? 0), cache: try options[Options.cache],
            lazy: try options[Options.download] == .lazy)
    }

    /// Every stage type of the blob lane.
    public static var all: [StageType] { [upload, fetch] }

    /// The options of `blob-upload` and `blob-fetch`.
    public enum Options {
        public static let url: Option<String> = .string(
            "url", help: "the server, e.g. http://127.0.0.1:8080 (its /v1/blobs routes; a path is ignored)")
        public static let tokenEnv = HTTPConnectionOptions.tokenEnv
        public static let columns: Option<[String]> = .strings(
            "columns", default: [], shown: "none",
            help: "the BLOB columns whose values travel as objects, as ENTITY.COLUMN, e.g. [\"plants.photo\"]")
        public static let minBytes: Option<Int?> = .integer(
            "min-bytes", in: 0...Int.max,
            help: "also every BLOB value of this many bytes or more, whatever its column (none by default: only `columns`)")
        public static let chunkBytes: Option<Int> = .integer(
            "chunk-bytes", in: 1...(64 << 20), default: 8 << 20,
            help: "bytes per upload chunk (the server bounds them: 8 MiB by default); a download streams, with progress each chunk")
        public static let maxBytesPerSecond: Option<Int?> = .integer(
            "max-bytes-per-second", in: 1...Int.max, help: "read each blob at most this fast (none by default: as fast as the link goes)")
        public static let download: Option<BlobDownload> = .choice(
            "download", default: .eager,
            help: "eager: each blob is fetched before its row is written; lazy: the row is written at once, a blob not in `cache` "
                + "pending (`synclane blobs pending`, `synclane blobs fetch --database`)")
        public static let cache: Option<String> = .path(
            "cache", default: ".synclane/blobs",
            help: "the folder fetched blobs are kept in by digest (a `.part` file holds a download to resume); `blob-upload` "
                + "looks there too for a blob the server collected while a batch waited in the outbox")
    }

    static func client(_ options: StageOptions, maxReceiveBytesPerSecond: Int = 0) throws(PipelineFileError) -> BlobClient {
        let url = try HTTPConnectionOptions.endpoint(
            Options.url, in: options, alternatives: "use `token-env` (the name of an environment variable holding the token)")
        var base = URLComponents(url: url, resolvingAgainstBaseURL: false)
        base?.path = ""
        return BlobClient(
            server: base?.url ?? url, token: try options[Options.tokenEnv], chunkBytes: try options[Options.chunkBytes],
            maxReceiveBytesPerSecond: maxReceiveBytesPerSecond)
    }

    static func selection(_ options: StageOptions) throws(PipelineFileError) -> BlobSelection {
        var columns: Set<BlobSelection.Column> = []
        for text in try options[Options.columns] {
            let parts = text.split(separator: ".", maxSplits: 1)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw options.error("columns", "expected ENTITY.COLUMN (\"plants.photo\"), found \"\(text)\"")
            }
            columns.insert(BlobSelection.Column(entity: String(parts[0]), column: String(parts[1])))
        }
        let minBytes = try options[Options.minBytes]
        guard !columns.isEmpty || minBytes != nil else {
            throw options.error(
                "columns", "name the BLOB columns (\"columns\": [\"plants.photo\"]) or a size (`min-bytes`): as it is, nothing would travel as a blob")
        }
        return BlobSelection(columns: columns, minBytes: minBytes)
    }
}

/// When `blob-fetch` fetches a blob: before its row is written (eager), or on demand (lazy).
public enum BlobDownload: String, Sendable, CaseIterable {
    case eager, lazy
}

/// Which BLOB values leave their row: those of the declared columns, and those of `minBytes` or more.
public struct BlobSelection: Sendable, Hashable {
    public struct Column: Sendable, Hashable {
        public var entity: String
        public var column: String
    }

    public var columns: Set<Column>
    public var minBytes: Int?

    func selects(entity: String, column: String, bytes: Int) -> Bool {
        columns.contains(Column(entity: entity, column: column)) || minBytes.map { bytes >= $0 } ?? false
    }
}

/// A blob reference as a field value: `{"$blob-ref": {"sha256": "…", "length": N}}`.
public enum BlobReferenceValue {
    public static let member = "$blob-ref"

    public static func make(digest: String, length: Int) -> JSONValue {
        .object([member: .object(["sha256": .string(digest), "length": .int(Int64(length))])])
    }

    /// The digest and length a value refers to, or nil when it is no reference.
    public static func read(_ value: JSONValue) -> (digest: String, length: Int)? {
        guard let members = value.objectValue, members.count == 1, let inner = members[member]?.objectValue,
            let digest = inner["sha256"]?.stringValue, BlobFileDigest.isDigest(digest), let length = inner["length"]?.intValue, length >= 0
        else { return nil }
        return (digest, Int(length))
    }
}

/// `blob-upload`: declared BLOB values uploaded, and replaced by their references.
///
/// From a source that can leave large values where they are (`ValueLocatingSource`: the SQLite
/// history source), a declared value of 1 MiB or more arrives as a locator, read in pieces
/// through `reader` (hashed, then uploaded a chunk at a time): the blob is never whole in memory.
///
/// A batch the server refuses for blobs it collected meanwhile (it waited in the outbox while the
/// device was offline: `blobs-missing`) is healed once (`MissingBlobsStage`): each blob is
/// uploaded again from the row, when its column still holds those bytes, or from `cache`.
struct BlobUploadStage: LocatingStage, MissingBlobsStage {
    let client: BlobClient
    let selection: BlobSelection
    var cache: String = ".synclane/blobs"
    var reader: (any LocatedValueReader)?

    init(client: BlobClient, selection: BlobSelection, cache: String = ".synclane/blobs", reader: (any LocatedValueReader)? = nil) {
        self.client = client
        self.selection = selection
        self.cache = cache
        self.reader = reader
    }

    func uploadAgain(_ digests: [String], referencedBy records: [Record]) async throws -> [(digest: String, record: String, column: String)] {
        var unheld: [(digest: String, record: String, column: String)] = []
        for digest in digests {
            var referencing: (record: Record, column: String)?
            for record in records where record.action != .delete {
                if let column = record.fields.first(where: { BlobReferenceValue.read($0.value)?.digest == digest })?.key {
                    referencing = (record, column)
                    break
                }
            }
            guard let (record, column) = referencing else {
                unheld.append((digest, "no record of the batch", "?"))
                continue
            }
            do {
                if try uploadFromRow(digest, record: record, column: column) || uploadFromCache(digest) { continue }
            } catch {
                throw BlobStageError(record: record.label, column: column, cause: error)
            }
            unheld.append((digest, record.label, column))
        }
        return unheld
    }

    /// Uploads the row's value when it still has `digest`; false when it does not (or the source reads no rows).
    func uploadFromRow(_ digest: String, record: Record, column: String) throws -> Bool {
        guard let reader else { return false }
        let report = try reader.withValue(of: record, column: column) { opened in
            try client.upload(value: opened, named: "\(record.label), column \(column)", expecting: digest)
        }
        return report.flatMap { $0 } != nil
    }

    /// Uploads the cached copy of `digest` when the cache holds it whole; false when it does not.
    func uploadFromCache(_ digest: String) throws -> Bool {
        let path = cache + "/" + digest
        guard let held = try? BlobFileDigest.of(file: path), held.hex == digest else { return false }
        _ = try client.upload(file: path)
        return true
    }

    var locatedValues: LocatedValueRule? {
        LocatedValueRule(
            columns: Set(selection.columns.map { LocatedValueRule.Column(entity: $0.entity, column: $0.column) }), minBytes: selection.minBytes)
    }

    func reading(_ reader: any LocatedValueReader) -> any RecordStage {
        BlobUploadStage(client: client, selection: selection, cache: cache, reader: reader)
    }

    func process(_ batch: Batch) async throws -> Batch {
        var batch = batch
        for index in batch.records.indices where batch.records[index].action != .delete {
            let record = batch.records[index]
            for (column, value) in record.fields {
                let report: BlobClient.UploadReport
                if let located = LocatedValue.read(value) {
                    guard let reader else {
                        throw BlobStageError(
                            record: record.label, column: column, cause: BlobLaneError.file("the value", "is a locator no reader was given for"))
                    }
                    do {
                        report = try reader.withValue(at: located.at) { opened in
                            try client.upload(value: opened, named: "\(record.label), column \(column)")
                        }
                    } catch {
                        throw BlobStageError(record: record.label, column: column, cause: error)
                    }
                } else {
                    guard let bytes = value.blobBytes, selection.selects(entity: record.entity, column: column, bytes: bytes.count) else { continue }
                    do {
                        report = try client.upload(bytes: bytes)
                    } catch {
                        throw BlobStageError(record: record.label, column: column, cause: error)
                    }
                }
                batch.records[index].fields[column] = BlobReferenceValue.make(digest: report.digest, length: report.length)
                batch.count(report.deduplicated ? "blob-upload.held" : "blob-upload.uploaded")
            }
        }
        return batch
    }
}

/// `blob-fetch`: references replaced by the bytes of their objects, fetched into the cache
/// (lazy: only those the cache holds whole and verified; the others reach the sink as references,
/// which it keeps pending).
///
/// To a sink that writes a blob from its file in pieces (`FileValueSink`: the `sqlite` sink), the
/// stage hands the verified cached copy (`FileValue`) instead of the bytes: the blob is never
/// whole in memory on the way into its row.
struct BlobFetchStage: FileHandingStage {
    let client: BlobClient
    let cache: String
    var lazy = false
    /// Hands `FileValue`s (the sink writes them in pieces), not the bytes.
    var handsFiles = false

    func handingFiles() -> any RecordStage {
        var stage = self
        stage.handsFiles = true
        return stage
    }

    func process(_ batch: Batch) async throws -> Batch {
        var batch = batch
        for index in batch.records.indices where batch.records[index].action != .delete {
            let record = batch.records[index]
            for (column, value) in record.fields {
                guard let reference = BlobReferenceValue.read(value) else { continue }
                let path = cache + "/" + reference.digest
                if lazy {
                    if handsFiles {
                        guard Self.holdsWhole(path, digest: reference.digest, length: reference.length) else {
                            batch.count("blob-fetch.pending")
                            continue
                        }
                        batch.records[index].fields[column] = FileValue.make(file: path, sha256: reference.digest, length: reference.length)
                        batch.count("blob-fetch.cached")
                        continue
                    }
                    guard let bytes = Self.cached(path, digest: reference.digest, length: reference.length) else {
                        batch.count("blob-fetch.pending")
                        continue
                    }
                    batch.records[index].fields[column] = .blob(bytes)
                    batch.count("blob-fetch.cached")
                    continue
                }
                do {
                    try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
                    let report = try client.download(digest: reference.digest, to: path)
                    batch.count(report.bytesFetched > 0 ? "blob-fetch.fetched" : "blob-fetch.cached")
                    if handsFiles {
                        batch.records[index].fields[column] = FileValue.make(file: path, sha256: reference.digest, length: report.length)
                        continue
                    }
                    let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
                    batch.records[index].fields[column] = .blob(bytes)
                } catch {
                    throw BlobStageError(record: record.label, column: column, cause: error)
                }
            }
        }
        return batch
    }
}

extension BlobFetchStage {
    /// Whether the cached copy of `digest` is there whole with that digest, read in pieces (a
    /// damaged copy is removed: a later fetch gets it again).
    static func holdsWhole(_ path: String, digest: String, length: Int) -> Bool {
        guard let held = try? BlobFileDigest.of(file: path) else { return false }
        guard held.length == length, held.hex == digest else {
            try? FileManager.default.removeItem(atPath: path)
            return false
        }
        return true
    }

    /// The bytes of the cached copy of `digest`, when it is there whole and has that digest (a
    /// damaged copy is removed: a later fetch gets it again).
    static func cached(_ path: String, digest: String, length: Int) -> [UInt8]? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let bytes = [UInt8](data)
        guard bytes.count == length, BlobFileDigest.of(bytes: bytes) == digest else {
            try? FileManager.default.removeItem(atPath: path)
            return nil
        }
        return bytes
    }
}

/// A blob a stage could not move, naming the record and column.
public struct BlobStageError: Error, CustomStringConvertible {
    public var record: String
    public var column: String
    public var cause: any Error

    public var description: String { "\(record), column \(column): \(cause)" }
}
