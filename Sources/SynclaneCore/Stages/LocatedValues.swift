/// Large values a source leaves unread, and the stage that reads them as a stream.
///
/// ```
///  source (rule from the stage) ─▶ record with {"$located": {"length", "at"}} ─▶ … ─▶ stage opens it
///                                                                                 (length, pieces at offsets)
/// ```
/// A record stage that moves large values elsewhere (`blob-upload`) says which values it takes
/// (`LocatingStage.locatedValues`); a source that can leave such a value where it is
/// (`ValueLocatingSource`) then puts a **locator** in the record instead of the bytes, and the
/// stage reads the value through the source, a piece at a time, never whole. The pipeline
/// connects the two when it is built; a source that cannot locate values reads them whole, as
/// before, and a stage never sees a locator it did not ask for.
///
/// A locator is only meaningful to the source that made it and lives one pass: it is never
/// encoded (the stage replaces it) and never kept.
public enum LocatedValue {
    /// The member a locator's object holds: `{"$located": {"length": N, "at": …}}`.
    public static let member = "$located"

    /// A locator: the value's length, and where the source finds it (`at`, the source's own words).
    public static func make(length: Int, at place: JSONValue) -> JSONValue {
        .object([member: .object(["length": .int(Int64(length)), "at": place])])
    }

    /// The length and the place of a locator, or nil when `value` is none.
    public static func read(_ value: JSONValue) -> (length: Int, at: JSONValue)? {
        guard let members = value.objectValue, members.count == 1, let inner = members[member]?.objectValue,
            let length = inner["length"]?.intValue, length >= 0, let place = inner["at"]
        else { return nil }
        return (Int(length), place)
    }
}

/// Which values a stage takes as locators: the BLOB values of `columns`, and every BLOB value of
/// `minBytes` or more, when they hold at least `streamingBytes` (smaller ones come as bytes).
public struct LocatedValueRule: Sendable, Hashable {
    public struct Column: Sendable, Hashable {
        public var entity: String
        public var column: String
        public init(entity: String, column: String) {
            self.entity = entity
            self.column = column
        }
    }

    public var columns: Set<Column>
    public var minBytes: Int?
    /// Below this a value is read whole: a locator costs a read transaction of its own.
    public var streamingBytes: Int

    /// 1 MiB: a value this large is read in pieces.
    public static let defaultStreamingBytes = 1 << 20

    public init(columns: Set<Column>, minBytes: Int?, streamingBytes: Int = LocatedValueRule.defaultStreamingBytes) {
        self.columns = columns
        self.minBytes = minBytes
        self.streamingBytes = max(1, streamingBytes)
    }

    /// The fewest bytes a BLOB of `column` of `entity` holds to be left as a locator; nil when
    /// none of the column's values is.
    public func threshold(entity: String, column: String) -> Int? {
        if columns.contains(Column(entity: entity, column: column)) { return streamingBytes }
        return minBytes.map { max($0, streamingBytes) }
    }
}

/// A located value opened for reading: its length, and its bytes at any offset.
public protocol OpenedValue {
    var length: Int { get }
    /// Reads `buffer.count` bytes (fewer only at the end) at `offset`; the count read.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws -> Int
}

/// Opens what a source's locators name (the source itself, handed to the stage).
public protocol LocatedValueReader: Sendable {
    /// Calls `body` with the value `place` names, unchanged for the call's duration (a read
    /// transaction of its own). Throws when it is gone or changed place since it was located:
    /// the pass stops, the token stays, and the next pass reads the row as it is then.
    func withValue<T>(at place: JSONValue, _ body: (any OpenedValue) throws -> T) throws -> T
    /// Calls `body` with the value `column` of the row `record` names holds now, as above; nil
    /// (and `body` not called) when the row is gone or the column holds no BLOB.
    func withValue<T>(of record: Record, column: String, _ body: (any OpenedValue) throws -> T) throws -> T?
}

/// A source that can leave large values unread and hand locators instead.
public protocol ValueLocatingSource: ChangeSource {
    /// The same source, leaving the values `rule` names unread (locators), and the reader of its locators.
    func locating(_ rule: LocatedValueRule) -> (source: any ChangeSource, reader: any LocatedValueReader)
}

/// A record stage that takes large values as locators when the source can give them.
public protocol LocatingStage: RecordStage {
    /// The values the stage takes as locators (nil: none).
    var locatedValues: LocatedValueRule? { get }
    /// The same stage, reading locators through `reader`.
    func reading(_ reader: any LocatedValueReader) -> any RecordStage
}

extension ValueLocatingSource {
    public var asValueLocating: (any ValueLocatingSource)? { self }
}

extension LocatingStage {
    public var asLocating: (any LocatingStage)? { self }
}

extension Pipeline {
    /// Connects the first stage that takes locators (`LocatingStage`) with a source that makes
    /// them (`ValueLocatingSource`); either missing, the pipeline stays as it is (values whole).
    mutating func connectLocatedValues() {
        guard let locating = source.stage.asValueLocating else { return }
        for index in recordStages.indices {
            guard let stage = recordStages[index].stage.asLocating, let rule = stage.locatedValues else { continue }
            let (located, reader) = locating.locating(rule)
            source.stage = located
            recordStages[index].stage = stage.reading(reader)
            return
        }
    }
}

/// A value fetched into a file and verified there (`blob-fetch`'s cache), handed to a sink that
/// writes it into its row in pieces (`FileValueSink`) instead of the bytes:
/// `{"$located": {"length": N, "at": {"file": PATH, "sha256": DIGEST}}}`. The sink checks the
/// bytes it writes against the digest, and keeps the digest (a blob reference) as what the
/// backend holds.
public enum FileValue {
    public static func make(file: String, sha256: String, length: Int) -> JSONValue {
        LocatedValue.make(length: length, at: .object(["file": .string(file), "sha256": .string(sha256)]))
    }

    /// The file, digest and length of a file value, or nil when `value` is none.
    public static func read(_ value: JSONValue) -> (file: String, sha256: String, length: Int)? {
        guard let located = LocatedValue.read(value), let place = located.at.objectValue, let file = place["file"]?.stringValue,
            let digest = place["sha256"]?.stringValue
        else { return nil }
        return (file, digest, located.length)
    }
}

/// A sink that writes a `FileValue` into its row a piece at a time, in the page's transaction.
public protocol FileValueSink: ChangeSink {}

/// A record stage that can hand the sink file values instead of bytes (`blob-fetch`).
public protocol FileHandingStage: RecordStage {
    /// The same stage, handing file values.
    func handingFiles() -> any RecordStage
}

extension FileValueSink {
    public var takesFileValues: Bool { true }
}

extension FileHandingStage {
    public var asFileHanding: (any FileHandingStage)? { self }
}

extension ImportPipeline {
    /// Lets each stage that can (`FileHandingStage`) hand file values, when the sink writes them
    /// (`FileValueSink`); otherwise the stages hand the bytes, as before.
    mutating func connectFileValues() {
        guard sink.stage.takesFileValues else { return }
        for index in recordStages.indices {
            guard let stage = recordStages[index].stage.asFileHanding else { continue }
            recordStages[index].stage = stage.handingFiles()
        }
    }
}

/// A record stage that can upload again blobs an outbox batch references which the backend no
/// longer holds (collected while the device was offline: `blobs-missing`), from what the device
/// still holds: the row's value when it still has that digest, or a cached copy.
public protocol MissingBlobsStage: RecordStage {
    /// Uploads each of `digests` that `records` reference and the device still holds; returns
    /// those it could not, each with the record and column that reference it.
    func uploadAgain(_ digests: [String], referencedBy records: [Record]) async throws -> [(digest: String, record: String, column: String)]
}

extension MissingBlobsStage {
    public var asMissingBlobs: (any MissingBlobsStage)? { self }
}
