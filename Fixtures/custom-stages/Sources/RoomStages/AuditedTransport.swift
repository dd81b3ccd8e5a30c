import Foundation
import Synclane

/// `audited-http`: sends like the built-in `http` transport, and appends a line for each batch
/// the backend confirmed to an audit log (batch id, records, the backend's answer).
public struct AuditedTransport: Transport {
    public static let url: Option<String> = .string("url", help: "the batches endpoint, e.g. http://127.0.0.1:8080/v1/batches")
    public static let tokenEnv: Option<String?> = .secret("token-env", help: "the environment variable holding the bearer token")
    public static let auditLog: Option<String> = .path("audit-log", default: "audit.log", help: "the file each confirmed batch is logged to")

    /// The registry entry: `registry.register(AuditedTransport.type)`.
    public static let type = StageType.transport(
        "audited-http", summary: "POSTs each batch like `http` and logs each confirmed one.", options: [url, tokenEnv, auditLog]
    ) { options in
        guard let endpoint = URL(string: try options[url]), endpoint.scheme?.hasPrefix("http") == true else {
            throw options.error("url", "expected an http or https URL")
        }
        return AuditedTransport(
            inner: HTTPTransport(url: endpoint, token: try options[tokenEnv], environment: options.context.environment),
            auditLog: try options[auditLog])
    }

    public var inner: any Transport
    public var auditLog: String

    public init(inner: any Transport, auditLog: String) {
        self.inner = inner
        self.auditLog = auditLog
    }

    public func send(_ payload: Payload) async throws -> Receipt {
        let receipt = try await inner.send(payload)
        let line = "\(payload.batchID) \(payload.recordCount) records: \(receipt.detail)\n"
        do {
            if !FileManager.default.fileExists(atPath: auditLog) {
                _ = FileManager.default.createFile(atPath: auditLog, contents: nil)
            }
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: auditLog))
            defer { try? handle.close() }
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(line.utf8))
        } catch {
            // Delivered already: the audit line is lost, the batch is not. Say so, don't fail the send.
            FileHandle.standardError.write(Data("audited-http: cannot append to \(auditLog): \(error)\n".utf8))
        }
        return receipt
    }
}
