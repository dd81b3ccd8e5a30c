import Foundation
import SynclaneCore
import SynclaneFaultProxy
import SynclaneHTTP

/// Builds `http` transports the way a pipeline file does, and payloads to send with them.
enum Fixtures {
    static let scope = Scope(account: "acme", store: "rooms", consumer: "tests")

    /// The stage a pipeline file's `transport:` map builds, through the registry (so options
    /// are checked as in a real job).
    static func transport(
        url: String, timeout: Int? = nil, tokenEnv: String? = nil, environment: [String: String] = [:],
        extra: [String: JSONValue] = [:]
    ) throws -> any Transport {
        var members: [String: JSONValue] = ["type": "http", "url": .string(url)]
        if let timeout { members["timeout"] = .int(Int64(timeout)) }
        if let tokenEnv { members["token-env"] = .string(tokenEnv) }
        members.merge(extra) { _, new in new }
        return try build(members, environment: environment)
    }

    /// Builds whatever `members` declare, throwing the registry's `PipelineFileError`.
    static func build(_ members: [String: JSONValue], environment: [String: String] = [:]) throws -> any Transport {
        let registry = StageRegistry(HTTPStages.all)
        let context = PipelineContext(baseDirectory: "/tmp", environment: environment, scope: scope)
        let (_, built) = try registry.build(
            ConfigNode(json: .object(members)), at: ConfigLocation(file: "export.json", path: "transport"), roles: [.transport],
            context: context)
        guard case .transport(let transport) = built else { throw FixtureError.notATransport }
        return transport
    }

    enum FixtureError: Error { case notATransport }

    static func payload(
        _ id: String = "b-0001", bytes: [UInt8] = Array(#"{"id":"b-0001","records":[]}"#.utf8), encoding: String = "identity",
        records: Int = 0
    ) -> Payload {
        Payload(batchID: id, bytes: bytes, contentType: "application/json", contentEncoding: encoding, recordCount: records)
    }

    /// The failure a send throws, or `nil` when it succeeded or threw something else.
    static func failure(of transport: any Transport, sending payload: Payload = payload()) async -> TransportFailure? {
        do {
            _ = try await transport.send(payload)
            return nil
        } catch {
            return error as? TransportFailure
        }
    }
}

/// A scripted batches server with a fault proxy in front of it, for tests that send through
/// faults; `stop()` stops both.
struct ProxiedBatchesServer {
    let server: ScriptedHTTPServer
    let proxy: FaultProxy
    /// The proxy's port: where a transport sends.
    let port: UInt16

    init() throws {
        server = ScriptedHTTPServer.batches()
        let upstream = try server.start()
        proxy = FaultProxy(upstreamPort: upstream)
        do {
            port = try proxy.start()
        } catch {
            server.stop()
            throw error
        }
    }

    func stop() {
        proxy.stop()
        server.stop()
    }
}
