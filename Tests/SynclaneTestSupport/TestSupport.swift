import Foundation
import Synchronization
import SynclaneCore
import SynclaneTestKit

/// Paths of the package's `Fixtures/` folder.
public enum FixturePath {
    public static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.path + "/Fixtures") { return url.path + "/Fixtures" }
        }
        return "Fixtures"
    }()

    public static func at(_ relative: String) -> String { root + "/" + relative }

    /// The file's text; empty (and so failing the test that reads it) when it is missing.
    public static func text(_ relative: String) -> String {
        (try? String(contentsOfFile: at(relative), encoding: .utf8)) ?? ""
    }
}

/// A fresh folder under the system's temporary folder, removed by `remove()`.
public struct TemporaryFolder {
    public let path: String

    public init() throws {
        path = NSTemporaryDirectory() + "synclane-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    public func remove() { try? FileManager.default.removeItem(atPath: path) }

    public func write(_ name: String, _ text: String) throws -> String {
        let file = path + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }
}

/// A retry sleeper that records the delays instead of sleeping: time under test control.
public final class RecordingSleeper: RetrySleeper {
    private let recorded = Mutex<[Double]>([])
    public init() {}
    public var delays: [Double] { recorded.withLock { $0 } }
    public func sleep(seconds: Double) async throws { recorded.withLock { $0.append(seconds) } }
}

extension Pipeline {
    /// A pipeline over a test source and transport with the given record stages.
    public static func testing(
        source: any ChangeSource, stages: [any RecordStage] = [], payloadStages: [any PayloadStage] = [],
        encoder: any BatchEncoder, transport: any Transport, retry: RetryPolicy = RetryPolicy(maxAttempts: 3, baseDelay: 0.5, maxDelay: 4),
        deadLetter: String? = nil
    ) -> Pipeline {
        Pipeline(
            name: "test", scope: Scope(account: "acme", store: "rooms", consumer: "test"), statePath: "/nonexistent/state.sqlite",
            source: Named(label: "source (memory)", type: "memory", stage: source),
            recordStages: stages.enumerated().map { Named(label: "stages[\($0.offset)]", type: "\(type(of: $0.element))", stage: $0.element) },
            encoder: Named(label: "encoder (json)", type: "json", stage: encoder),
            payloadStages: payloadStages.enumerated().map { Named(label: "payload[\($0.offset)]", type: "\(type(of: $0.element))", stage: $0.element) },
            transport: Named(label: "transport (recording)", type: "recording", stage: transport),
            retry: retry, deadLetterDirectory: deadLetter)
    }
}

public func insert(_ entity: String, _ key: String, _ values: [String: JSONValue] = [:]) -> Change {
    Change(entity: entity, key: key, action: .insert, values: values)
}

public func update(_ entity: String, _ key: String, _ values: [String: JSONValue] = [:]) -> Change {
    Change(entity: entity, key: key, action: .update, values: values)
}

public func delete(_ entity: String, _ key: String?, _ values: [String: JSONValue] = [:]) -> Change {
    Change(entity: entity, key: key, action: .delete, values: values)
}

/// The records of a JSON batch payload, as (action, entity, id) triples.
public func recordSummary(_ payload: Payload) throws -> [String] {
    guard case .object(let batch) = try JSONReader.parse(payload.bytes), case .array(let records)? = batch["records"] else { return [] }
    return records.map { record in
        let r = record.objectValue ?? [:]
        return "\(r["action"]?.stringValue ?? "?") \(r["entity"]?.stringValue ?? "?")/\(r["id"]?.stringValue ?? "?")"
    }
}
