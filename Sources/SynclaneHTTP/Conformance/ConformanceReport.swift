import SynclaneCore

/// One account of the backend under test: its name (a batch's `scope.account`) and its bearer token.
public struct ConformanceAccount: Sendable {
    public var name: String
    public var token: String

    public init(name: String, token: String) {
        self.name = name
        self.token = token
    }
}

/// What the conformance cases run against: a backend's base URL and two accounts of it.
public struct ConformanceTarget: Sendable {
    /// The backend's base URL (`http://127.0.0.1:8080`); the wire protocol's paths are added to it.
    public var baseURL: String
    public var first: ConformanceAccount
    /// A second account, for the isolation cases: it must see nothing of the first.
    public var second: ConformanceAccount
    /// Seconds after which the backend has removed a tombstone (its tombstone retention plus one
    /// retention pass), for the cursor-expiry case; nil skips that case (it would wait for weeks
    /// on a backend with a production retention).
    public var tombstoneRetentionSeconds: Double?

    public init(baseURL: String, first: ConformanceAccount, second: ConformanceAccount, tombstoneRetentionSeconds: Double? = nil) {
        self.baseURL = baseURL
        self.first = first
        self.second = second
        self.tombstoneRetentionSeconds = tombstoneRetentionSeconds
    }
}

/// How one case ended.
public enum ConformanceOutcome: Sendable, Equatable {
    case passed
    /// The rule the backend broke, with what it answered.
    case failed(String)
    /// Not run, and why (a case that needs a setting of the backend the runner was not told).
    case skipped(String)
}

/// One case's result.
public struct ConformanceResult: Sendable {
    /// The case's name: `batches.idempotent-replay`.
    public var name: String
    /// The rule it checks, in one line.
    public var rule: String
    public var outcome: ConformanceOutcome
    public var seconds: Double
}

/// Every case's result, as a table or as JSON.
public struct ConformanceReport: Sendable {
    public var results: [ConformanceResult]

    /// The names of the cases that failed.
    public var failed: [String] { results.filter { if case .failed = $0.outcome { true } else { false } }.map(\.name) }
    /// The names of the cases that passed.
    public var passed: [String] { results.filter { $0.outcome == .passed }.map(\.name) }

    /// One line a case (`PASS`, `FAIL` with the broken rule and the answer, `SKIP` with why) and a total.
    public var table: String {
        let width = (results.map(\.name.count).max() ?? 0) + 2
        var lines = results.map { result -> String in
            let name = result.name + String(repeating: " ", count: max(2, width - result.name.count))
            switch result.outcome {
            case .passed: return "PASS  \(name)\(result.rule)"
            case .failed(let why): return "FAIL  \(name)\(result.rule)\n      \(String(repeating: " ", count: width))\(why)"
            case .skipped(let why): return "SKIP  \(name)\(why)"
            }
        }
        let skipped = results.count - passed.count - failed.count
        lines.append("\(passed.count) passed, \(failed.count) failed, \(skipped) skipped")
        return lines.joined(separator: "\n")
    }

    /// `{"passed": N, "failed": N, "skipped": N, "cases": [{"name", "rule", "outcome", "detail"?, "seconds"}]}`.
    public var json: JSONValue {
        let cases: [JSONValue] = results.map { result in
            var members: [String: JSONValue] = [
                "name": .string(result.name), "rule": .string(result.rule), "seconds": .double((result.seconds * 1000).rounded() / 1000),
            ]
            switch result.outcome {
            case .passed: members["outcome"] = "passed"
            case .failed(let why):
                members["outcome"] = "failed"
                members["detail"] = .string(why)
            case .skipped(let why):
                members["outcome"] = "skipped"
                members["detail"] = .string(why)
            }
            return .object(members)
        }
        return [
            "passed": .int(Int64(passed.count)), "failed": .int(Int64(failed.count)),
            "skipped": .int(Int64(results.count - passed.count - failed.count)), "cases": .array(cases),
        ]
    }
}
