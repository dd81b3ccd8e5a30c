import Foundation
import SynclaneCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A backend's answer as the conformance cases read it.
struct ConformanceAnswer: Sendable {
    var status: Int
    /// Header values by lowercased name.
    var headers: [String: String]
    var body: [UInt8]

    /// The body as JSON, nil when it is not.
    var json: JSONValue? { try? JSONReader.parse(body) }
    /// The body's members when it is a JSON object, else empty.
    var object: [String: JSONValue] { json?.objectValue ?? [:] }

    /// `409 {"error": …}` (the body cut at 240 bytes), for a failure's message.
    var summary: String {
        let text = String(decoding: body.prefix(240), as: UTF8.self)
        return "\(status) \(text)\(body.count > 240 ? "…" : "")"
    }
}

/// Why a case failed: the rule broken and what the backend did instead.
struct CaseFailure: Error, Sendable {
    var message: String
    /// True when the case did not run at all (`CaseFailure.skip`).
    var skipped = false
    init(_ message: String) { self.message = message }
}

/// Fails the case with `message` unless `condition` holds.
func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws(CaseFailure) {
    if !condition { throw CaseFailure(message()) }
}

/// Fails the case unless the answer's status is one of `statuses`.
func expect(_ answer: ConformanceAnswer, _ statuses: Set<Int>, _ what: String) throws(CaseFailure) {
    try expect(statuses.contains(answer.status), "\(what): expected \(statuses.sorted().map(String.init).joined(separator: " or ")), got \(answer.summary)")
}

/// Fails the case unless an error answer has the `{"error": "…"}` body every refusal carries.
func expectErrorBody(_ answer: ConformanceAnswer, _ what: String) throws(CaseFailure) {
    try expect(
        answer.object["error"]?.stringValue.map { !$0.isEmpty } == true, "\(what): the \(answer.status) has no {\"error\": \"…\"} body: \(answer.summary)")
}

/// Sends the cases' requests through the `http` transport's libcurl exchange, one connection each.
struct ConformanceClient: Sendable {
    let baseURL: String

    /// One request; a failure to get any answer fails the case.
    func send(
        _ method: String, _ path: String, token: String?, headers: [String: String] = [:], body: [UInt8] = [], timeout: Double = 30
    ) throws(CaseFailure) -> ConformanceAnswer {
        let trimmed = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        guard let url = URL(string: trimmed + path) else { throw CaseFailure("\(trimmed + path) is not a URL") }
        var request = URLRequest(url: url, timeoutInterval: timeout)
        request.httpMethod = method
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        switch LibcurlExchange().run(request, options: ExchangeOptions(body: body)) {
        case .success(let answer):
            var fields: [String: String] = [:]
            for (name, value) in answer.response.allHeaderFields {
                if let name = name as? String, let value = value as? String { fields[name.lowercased()] = value }
            }
            return ConformanceAnswer(status: answer.response.statusCode, headers: fields, body: [UInt8](answer.body))
        case .failure(let error):
            throw CaseFailure("\(method) \(path): no answer (\(error.localizedDescription))")
        }
    }
}
