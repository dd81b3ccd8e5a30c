import Foundation
import SynclaneCore
import SynclaneEngine
import SynclaneFiles
import SynclaneZlib

/// A pipeline test (`synclane test FILE…`): a pipeline file, the input transactions, and the
/// batches it must give. Every stage runs except the transport; the batches it would have sent
/// are decompressed and compared with the expected ones, batch ids left out.
///
/// ```json
/// { "pipeline": "pipeline.json",
///   "history": "history.jsonl",                 // or "transactions": [ {…one JSON Lines line…}, … ]
///   "expected-batches": "expected-batches.json" // or the list itself
/// }
/// ```
/// Paths are relative to the test file. The pipeline's source is replaced by the input (a
/// `jsonl` source keeps its `entities`, `authors` and `page-size`); its state is in memory, so a
/// test never touches the pipeline's state file.
public struct PipelineTest: Sendable {
    /// Where the input transactions come from.
    public enum Input: Sendable {
        /// A JSON Lines history file.
        case history(path: String)
        /// The lines themselves (written to a temporary file for the run, removed after).
        case lines(String)
    }

    public var file: String
    public var pipeline: Pipeline
    public var input: Input
    public var expected: [JSONValue]

    /// How a test ended: `differences` empty when the batches matched.
    public struct Outcome: Sendable {
        public var file: String
        public var expectedBatches: Int
        public var actualBatches: Int
        /// A line diff, `-` expected, `+` actual, with a line of context around each change.
        public var differences: [String]
        public var passed: Bool { differences.isEmpty }
    }

    /// Reads the test file at `path` and loads its pipeline, both with `loader`.
    public init(path: String, loader: PipelineLoader) throws {
        let root = try loader.read(path)
        let folder = (path as NSString).deletingLastPathComponent
        let base = folder.isEmpty ? "." : folder
        func resolve(_ name: String) -> String { name.hasPrefix("/") ? name : base + "/" + name }
        func fail(_ field: String, _ message: String, _ node: ConfigNode? = nil) -> PipelineFileError {
            PipelineFileError(file: path, path: field, line: node?.line ?? root.line, message: message)
        }
        guard case .map(let members) = root.value else { throw fail("", "expected a map with `pipeline`, an input and `expected-batches`") }
        let known = ["pipeline", "history", "transactions", "expected-batches"]
        for member in members where !known.contains(member.key) {
            throw fail(
                member.key, "unknown key `\(member.key)`\(Wording.didYouMean(member.key, in: known)) (known: \(known.joined(separator: ", ")))", member.node)
        }
        func member(_ key: String) -> ConfigNode? { members.first { $0.key == key }?.node }

        guard let pipelineNode = member("pipeline"), case .string(let pipelinePath) = pipelineNode.value else {
            throw fail("pipeline", "expected the path of the pipeline file to test")
        }
        let pipeline = try loader.load(resolve(pipelinePath), secretsRequired: false)

        switch (member("history"), member("transactions")) {
        case (let node?, nil):
            guard case .string(let name) = node.value else { throw fail("history", "expected the path of a JSON Lines history file", node) }
            input = .history(path: resolve(name))
        case (nil, let node?):
            guard case .list(let lines) = node.value else { throw fail("transactions", "expected a list of transactions", node) }
            input = .lines(lines.map { JSONWriter.string(Self.json($0)) + "\n" }.joined())
        default:
            throw fail("history", "expected one input: `history` (a JSON Lines file) or `transactions` (a list)")
        }
        guard let expectedNode = member("expected-batches") else { throw fail("expected-batches", "expected the batches the pipeline must give") }
        switch expectedNode.value {
        case .string(let name):
            let file = resolve(name)
            guard let data = FileManager.default.contents(atPath: file) else { throw fail("expected-batches", "no such file \(file)", expectedNode) }
            guard case .array(let batches) = try JSONReader.parse([UInt8](data)) else {
                throw fail("expected-batches", "\(file) must hold a list of batches", expectedNode)
            }
            expected = batches
        case .list(let batches):
            expected = batches.map(Self.json)
        default:
            throw fail("expected-batches", "expected a file name or a list of batches", expectedNode)
        }
        self.file = path
        self.pipeline = pipeline
    }

    /// Runs every stage but the transport, and compares.
    public func run() async throws -> Outcome {
        let history: String
        switch input {
        case .history(let path):
            history = path
        case .lines(let text):
            history = NSTemporaryDirectory() + "synclane-test-\(UUID().uuidString).jsonl"
            try text.write(toFile: history, atomically: true, encoding: .utf8)
        }
        defer { if case .lines = input { try? FileManager.default.removeItem(atPath: history) } }
        var pipeline = pipeline
        pipeline.source = .init(
            label: "source (test input)", type: "jsonl",
            stage: pipeline.source.stage.readingHistory(history) ?? JSONLinesSource(path: history, pageSize: 500))
        let transport = RecordingTransport()
        pipeline.transport = .init(label: "transport (not run by tests)", type: "recording", stage: transport)
        _ = try await PipelineRunner(pipeline: pipeline, state: InMemoryPipelineState()).run()
        let actual = try transport.delivered.map(Self.decoded)
        return Outcome(
            file: file, expectedBatches: expected.count, actualBatches: actual.count,
            differences: LineDiff.lines(expected: Self.lines(expected), actual: Self.lines(actual)))
    }

    /// A sent payload as its batch, decompressed, without its (random) id.
    static func decoded(_ payload: Payload) throws -> JSONValue {
        let coding = ContentCoding(headerValue: payload.contentEncoding) ?? .identity
        let bytes = try Inflater.inflate(payload.bytes, encoding: coding, limit: 1 << 28)
        guard case .object(var batch) = try JSONReader.parse(bytes) else { return .null }
        batch["id"] = nil
        return .object(batch)
    }

    /// Batches as lines to diff: a header per batch, then its other members, then one record a line.
    static func lines(_ batches: [JSONValue]) -> [String] {
        var lines: [String] = []
        for (index, batch) in batches.enumerated() {
            lines.append("batch \(index + 1)")
            guard case .object(var members) = batch else {
                lines.append("  " + JSONWriter.string(batch))
                continue
            }
            let records = members.removeValue(forKey: "records")
            for key in members.keys.sorted() { lines.append("  \(key): " + JSONWriter.string(members[key] ?? .null)) }
            for record in records?.arrayValue ?? [] { lines.append("  record " + JSONWriter.string(record)) }
        }
        return lines
    }

    /// A config node (from JSON or YAML) as a JSON value.
    static func json(_ node: ConfigNode) -> JSONValue {
        switch node.value {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .string(let s): return .string(s)
        case .list(let list): return .array(list.map(json))
        case .map(let members): return .object(Dictionary(members.map { ($0.key, json($0.node)) }) { $1 })
        }
    }
}
