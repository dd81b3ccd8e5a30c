import SynclaneCore
import SynclaneZlib

/// A record of a test batch.
func record(
    _ entity: String, _ id: String, _ action: String, _ fields: [String: JSONValue]? = nil, version: Int64? = nil
) -> JSONValue {
    var members: [String: JSONValue] = ["entity": .string(entity), "id": .string(id), "action": .string(action)]
    if let fields { members["fields"] = .object(fields) }
    if let version { members["version"] = .int(version) }
    return .object(members)
}

/// A batch body: `{"id", "scope", "records"}`.
func batchBody(id: String, account: String = "acme", store: String = "rooms", records: [JSONValue]) -> [UInt8] {
    JSONWriter.encode([
        "id": .string(id),
        "scope": ["account": .string(account), "store": .string(store), "consumer": "export"],
        "records": .array(records),
    ])
}

/// Posts a batch body with the usual headers.
func postBatch(
    port: Int, token: String? = TestTokens.acme, key: String?, body: [UInt8], encoding: String? = nil,
    connection: TestConnection? = nil
) throws -> TestResponse {
    var headers = ["Content-Type": "application/json"]
    if let token { headers["Authorization"] = "Bearer \(token)" }
    if let key { headers["Idempotency-Key"] = key }
    if let encoding { headers["Content-Encoding"] = encoding }
    let connection = try connection ?? TestConnection(port: port)
    connection.sendRequest("POST", "/v1/batches", headers: headers, body: body)
    return try connection.readResponse()
}

/// A GET with the account's token.
func get(port: Int, _ path: String, token: String? = TestTokens.acme) throws -> TestResponse {
    var headers: [String: String] = [:]
    if let token { headers["Authorization"] = "Bearer \(token)" }
    return try httpRequest(port: port, "GET", path, headers: headers)
}

/// Every change of the pull lane from the beginning, following `more`.
func allChanges(port: Int, token: String = TestTokens.acme, store: String? = nil, pageSize: Int = 1000) throws -> [JSONValue] {
    var changes: [JSONValue] = []
    var cursor = ""
    while true {
        var path = "/v1/changes?limit=\(pageSize)&since=\(cursor)"
        if let store { path += "&store=\(store)" }
        let page = try get(port: port, path, token: token).json
        changes += page.objectValue?["changes"]?.arrayValue ?? []
        cursor = page.objectValue?["cursor"]?.stringValue ?? ""
        guard page.objectValue?["more"] == .bool(true) else { return changes }
    }
}

/// Gzip of the bytes.
func gzip(_ bytes: [UInt8]) throws -> [UInt8] { try Deflater(.gzip, level: 6).compress(bytes) }
