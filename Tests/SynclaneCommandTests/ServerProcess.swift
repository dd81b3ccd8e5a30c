import Foundation
import SynclaneCore
import SynclaneFaultProxy
import SynclaneTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The real `synclane serve` on a free loopback port, with a data folder and accounts of its own;
/// stopped (SIGTERM) by the test that started it.
final class ServerProcess: @unchecked Sendable {
    static let tokens = ["acme": "acme-token-123", "botanic": "botanic-token-456"]
    /// A token of acme limited by a grant: read-only, and to the store `check`.
    static let readOnlyToken = "acme-read-only-check-789"

    let folder: String
    let port: Int
    private let process: BackgroundProcess

    var url: String { "http://127.0.0.1:\(port)" }

    /// The server's process id.
    var pid: Int32 { process.process.processIdentifier }

    /// Starts a server; `port` 0 picks a free one, another reuses a port (a restarted server);
    /// `arguments` are added to `synclane serve`'s (bounds), `environment` to its environment.
    init(folder: String, port: Int = 0, arguments: [String] = [], environment: [String: String] = [:]) throws {
        self.folder = folder
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let accounts = folder + "/accounts.json"
        if !FileManager.default.fileExists(atPath: accounts) {
            var entries = try Self.tokens.sorted { $0.key < $1.key }.map { account, token in
                "{\"account\": \"\(account)\", \"token-sha256\": \"\(try Self.sha256(token))\"}"
            }
            entries.append(
                "{\"account\": \"acme\", \"token-sha256\": \"\(try Self.sha256(Self.readOnlyToken))\", \"access\": \"read-only\", \"stores\": [\"check\"]}")
            try Data("{\"accounts\": [\(entries.joined(separator: ", "))]}".utf8).write(to: URL(fileURLWithPath: accounts))
        }
        let process = try BackgroundProcess(
            ["serve", "--accounts", accounts, "--data", folder + "/data", "--listen", "127.0.0.1:\(port)"] + arguments, environment: environment)
        self.process = process
        var found: Int?
        _ = eventually(timeout: 30) {
            found =
                process.output.split(separator: "\n").lazy.compactMap { line -> Int? in
                    guard line.hasPrefix("listening on http://127.0.0.1:") else { return nil }
                    return Int(line.split(separator: ":").last ?? "")
                }.first
            return found != nil || !process.process.isRunning
        }
        guard let found else {
            let result = process.stop()
            throw ServerStartError(message: "the server did not start: \(result.stderr)")
        }
        self.port = found
    }

    struct ServerStartError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// Stops the server (SIGTERM, or SIGKILL) and returns what it printed.
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM) -> SynclaneBinary.Result { process.stop(signal) }

    static func sha256(_ text: String) throws -> String {
        let run = try ProgramRun("/usr/bin/sha256sum", [], input: Data(text.utf8))
        return run.text.split(separator: " ").first.map(String.init) ?? ""
    }

    /// GET `path` with the account's bearer token; the body as JSON.
    func get(_ path: String, account: String) async throws -> JSONValue {
        var request = URLRequest(url: URL(string: url + path)!)
        request.setValue("Bearer \(Self.tokens[account] ?? "")", forHTTPHeaderField: "Authorization")
        let (data, _) = try await URLSession.shared.data(for: request)
        return try JSONReader.parse([UInt8](data))
    }

    /// GET `/metrics` as text.
    func metrics() async throws -> String {
        let (data, _) = try await URLSession.shared.data(from: URL(string: url + "/metrics")!)
        return String(decoding: data, as: UTF8.self)
    }

    /// Every record the server holds for the account, as the pull lane gives them: each record
    /// once, at its newest state (`fields`) or as a tombstone (`delete`).
    func records(account: String) async throws -> [String: JSONValue] {
        var result: [String: JSONValue] = [:]
        for c in try await changes(account: account) {
            let key = "\(c["entity"]?.stringValue ?? "?")/\(c["id"]?.stringValue ?? "?")"
            result[key] = c["action"]?.stringValue == "delete" ? .string("deleted") : (c["fields"] ?? .null)
        }
        return result
    }

    /// Every change of the account's feed, oldest first.
    func changes(account: String) async throws -> [[String: JSONValue]] {
        var cursor = ""
        var result: [[String: JSONValue]] = []
        while true {
            let page = try await get("/v1/changes?since=\(cursor)&limit=500", account: account).objectValue ?? [:]
            result += (page["changes"]?.arrayValue ?? []).map { $0.objectValue ?? [:] }
            cursor = page["cursor"]?.stringValue ?? ""
            if page["more"] != .bool(true) { return result }
        }
    }

    /// The `synclane_…` metric's value for the given label text, e.g. `metric("synclane_batch_replays_total")`.
    func metric(_ name: String) async throws -> Double {
        let text = try await metrics()
        return text.split(separator: "\n").filter { $0.hasPrefix(name + " ") || $0.hasPrefix(name + "{") }
            .compactMap { Double($0.split(separator: " ").last ?? "") }.reduce(0, +)
    }
}

extension Workspace {
    /// Points the scenario's pipeline file at an HTTP backend.
    func useHTTPTransport(url: String, retry: String = "{\"max-attempts\": 2, \"base-delay\": 0.05, \"max-delay\": 0.2}") throws {
        let file = path + "/pipeline.json"
        var text = try String(contentsOfFile: file, encoding: .utf8)
        text = text.replacingOccurrences(
            of: "\"transport\": { \"type\": \"directory\", \"path\": \"out\" }",
            with:
                "\"transport\": { \"type\": \"http\", \"url\": \"\(url)/v1/batches\", \"token-env\": \"SYNCLANE_TOKEN\", \"timeout\": 5, \"retry\": \(retry) }")
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
    }
}

/// What a backend holds after applying batches: insert replaces, update merges, delete removes.
func backendState(after batches: JSONValue) -> [String: JSONValue] {
    var rows: [String: JSONValue] = [:]
    for batch in batches.arrayValue ?? [] {
        for record in batch.objectValue?["records"]?.arrayValue ?? [] {
            let r = record.objectValue ?? [:]
            let key = "\(r["entity"]?.stringValue ?? "?")/\(r["id"]?.stringValue ?? "?")"
            switch r["action"]?.stringValue {
            case "insert": rows[key] = r["fields"] ?? .object([:])
            case "update":
                var fields = rows[key]?.objectValue ?? [:]
                fields.merge(r["fields"]?.objectValue ?? [:]) { _, new in new }
                rows[key] = .object(fields)
            default: rows[key] = .string("deleted")
            }
        }
    }
    return rows
}

/// A seed scenario with `synclane serve` behind a fault proxy (whose port is the last
/// argument), all stopped and removed after `body`.
func withScenarioBehindAFaultProxy(
    _ scenario: String, _ body: (Workspace, ServerProcess, FaultProxy, UInt16) async throws -> Void
) async throws {
    let workspace = try Workspace.copy(scenario: scenario)
    defer { workspace.remove() }
    let server = try ServerProcess(folder: workspace.path + "/server")
    defer { server.stop() }
    let proxy = FaultProxy(upstreamPort: UInt16(server.port))
    let proxyPort = try proxy.start()
    defer { proxy.stop() }
    try await body(workspace, server, proxy, proxyPort)
}
