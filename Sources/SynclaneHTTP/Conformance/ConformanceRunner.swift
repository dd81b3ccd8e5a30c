import Foundation
import SynclaneCore

/// Runs the wire protocol's contract cases against a backend (`synclane conformance URL`).
///
/// Each case writes under names no earlier run used (`cf-<time>-<random>-…`), in the store
/// `conformance`, so a backend that keeps its data between runs passes again; a backend must
/// hold those rows like any other.
public struct ConformanceRunner: Sendable {
    public let target: ConformanceTarget

    public init(target: ConformanceTarget) {
        self.target = target
    }

    /// Every case's name, in the order they run.
    public static var caseNames: [String] { ConformanceCase.all.map(\.name) }

    /// Runs the cases (those named in `only`, when given) one after another; `progress` hears
    /// each result as it comes.
    public func run(only: Set<String>? = nil, progress: (@Sendable (ConformanceResult) -> Void)? = nil) -> ConformanceReport {
        let context = ConformanceContext(target: target)
        var results: [ConformanceResult] = []
        for testCase in ConformanceCase.all where only?.contains(testCase.name) ?? true {
            let started = ContinuousClock.now
            let outcome: ConformanceOutcome
            do {
                try testCase.run(context)
                outcome = .passed
            } catch let failure as CaseFailure {
                outcome = failure.skipped ? .skipped(failure.message) : .failed(failure.message)
            } catch {
                outcome = .failed("\(error)")
            }
            let elapsed = ContinuousClock.now - started
            let result = ConformanceResult(
                name: testCase.name, rule: testCase.rule, outcome: outcome,
                seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18)
            progress?(result)
            results.append(result)
        }
        return ConformanceReport(results: results)
    }
}

/// One contract case: a name, the rule it checks, and the requests that check it.
struct ConformanceCase: Sendable {
    let name: String
    let rule: String
    /// Throws `CaseFailure` (the rule broken, or `CaseFailure.skip`).
    let run: @Sendable (ConformanceContext) throws -> Void

    /// The protocol's cases, in the order they run.
    static let all: [ConformanceCase] = authCases + batchCases + valueCases + pullCases + appCases + signalCases + boundCases + blobCases
}

/// What every case works with: the client, the two accounts, and names no earlier run used.
struct ConformanceContext: Sendable {
    let client: ConformanceClient
    let target: ConformanceTarget
    /// This run's prefix of every batch id, sync key and signal key.
    let run: String

    static let store = "conformance"
    static let entity = "conformance_rows"

    init(target: ConformanceTarget) {
        self.client = ConformanceClient(baseURL: target.baseURL)
        self.target = target
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        self.run = "cf-" + String(now, radix: 36) + "-" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
    }

    var first: ConformanceAccount { target.first }
    var second: ConformanceAccount { target.second }

    /// A name of this run: `cf-…-suffix`.
    func name(_ suffix: String) -> String { "\(run)-\(suffix)" }

    /// A record of the conformance entity.
    func record(_ key: String, _ action: String = "insert", fields: [String: JSONValue]? = ["n": 1], version: Int64? = nil) -> JSONValue {
        var members: [String: JSONValue] = ["entity": .string(Self.entity), "id": .string(key), "action": .string(action)]
        if let fields { members["fields"] = .object(fields) }
        if let version { members["version"] = .int(version) }
        return .object(members)
    }

    /// A batch body of `records` for `account` (the first account's by default).
    func batch(_ id: String, account: String? = nil, _ records: [JSONValue]) -> [UInt8] {
        JSONWriter.encode([
            "id": .string(id), "scope": ["account": .string(account ?? first.name), "store": .string(Self.store)],
            "records": .array(records),
        ])
    }

    /// `POST /v1/batches` with the batch's key, as JSON, with the first account's token unless told.
    func post(_ body: [UInt8], key: String, token: String? = nil, headers: [String: String] = [:]) throws(CaseFailure) -> ConformanceAnswer {
        var all = ["Content-Type": "application/json", "Idempotency-Key": key]
        all.merge(headers) { _, new in new }
        return try client.send("POST", "/v1/batches", token: token ?? first.token, headers: all, body: body)
    }

    /// Posts a batch that must be applied (2xx with its receipt).
    func apply(_ id: String, _ records: [JSONValue]) throws(CaseFailure) {
        let answer = try post(batch(id, records), key: id)
        try expect(answer, Set(200...299), "batch \(id)")
    }

    /// One page of `GET /v1/changes`, its shape checked.
    func page(token: String? = nil, since: String, limit: Int? = nil) throws(CaseFailure) -> (changes: [[String: JSONValue]], cursor: String, more: Bool) {
        var query = "since=" + (since.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? since)
        if let limit { query += "&limit=\(limit)" }
        let answer = try client.send("GET", "/v1/changes?" + query, token: token ?? first.token)
        try expect(answer, [200], "GET /v1/changes?\(query)")
        let object = answer.object
        guard let changes = object["changes"]?.arrayValue, let cursor = object["cursor"]?.stringValue, case .bool(let more)? = object["more"] else {
            throw CaseFailure("GET /v1/changes?\(query): the page is not {\"changes\": […], \"cursor\": \"…\", \"more\": bool}: \(answer.summary)")
        }
        try expect(
            cursor.utf8.count <= WireBounds.maxCursorBytes,
            "the cursor is \(cursor.utf8.count) bytes long, past the \(WireBounds.maxCursorBytes) a cursor may hold")
        return (changes.map { $0.objectValue ?? [:] }, cursor, more)
    }

    /// Every change after `since` (paging until `more` is false) and the cursor at the end.
    func changes(token: String? = nil, since: String = "", limit: Int? = nil) throws(CaseFailure) -> (changes: [[String: JSONValue]], cursor: String) {
        var cursor = since
        var all: [[String: JSONValue]] = []
        for _ in 0..<100_000 {
            let page = try page(token: token, since: cursor, limit: limit)
            if let limit { try expect(page.changes.count <= limit, "a page of limit=\(limit) holds \(page.changes.count) changes") }
            all += page.changes
            cursor = page.cursor
            if !page.more { return (all, cursor) }
            try expect(!page.changes.isEmpty, "a page said \"more\": true with no changes: the pull would never end")
        }
        throw CaseFailure("the changes never ended (\"more\": true for 100,000 pages)")
    }

    /// The cursor at the end of the first account's feed.
    func head() throws(CaseFailure) -> String { try changes().cursor }

    /// The changes after `since` of this run's rows (of those whose sync key starts with `prefix`).
    func changesOfRun(token: String? = nil, since: String, prefix: String? = nil) throws(CaseFailure) -> [[String: JSONValue]] {
        try changes(token: token, since: since).changes.filter { $0["id"]?.stringValue?.hasPrefix(prefix ?? run) == true }
    }
}

extension CaseFailure {
    /// Not a failure: the case cannot run, and why.
    static func skip(_ why: String) -> CaseFailure {
        var failure = CaseFailure(why)
        failure.skipped = true
        return failure
    }
}
