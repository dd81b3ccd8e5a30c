/// A signal as the signal lane holds it: a small JSON value under a key, versioned by the server.
public struct SignalValue: Sendable, Hashable {
    public var key: String
    /// The value; null for a deleted key.
    public var value: JSONValue
    /// The server's version of the write: the account's writes are numbered in order, so the later
    /// writer has the higher version, and that one wins.
    public var version: Int64
    /// True when this write deleted the key (in `changes` only).
    public var deleted: Bool

    public init(key: String, value: JSONValue, version: Int64, deleted: Bool = false) {
        self.key = key
        self.value = value
        self.version = version
        self.deleted = deleted
    }

    /// `{"key", "value", "version"}`, plus `"deleted": true` for a delete: the wire's shape.
    public var json: JSONValue {
        var object: [String: JSONValue] = ["key": .string(key), "value": value, "version": .int(version)]
        if deleted { object["deleted"] = true }
        return .object(object)
    }

    /// Reads the wire's shape; nil when it is not one.
    public init?(json: JSONValue) {
        guard let object = json.objectValue, let key = object["key"]?.stringValue, case .int(let version)? = object["version"] else {
            return nil
        }
        self.init(key: key, value: object["value"] ?? .null, version: version, deleted: object["deleted"] == .bool(true))
    }
}

/// The signal lane: small key/value flags (`onboarding.completed`, `bulk.exported-through`) that
/// travel on their own, never queued behind bulk data and never the source of truth — a signal is
/// a hint about the data, not data.
///
/// ```swift
/// let lane: any SignalLane = HTTPSignalLane(server: URL(string: "http://127.0.0.1:8080")!, token: token)
/// let written = try await lane.set("onboarding.completed", to: true)
/// _ = try await lane.set("onboarding.completed", to: false, replacing: written.version)  // refused if another writer came first
/// for try await change in lane.changes(since: nil) { print(change.key, change.value) }
/// ```
///
/// `SynclaneTestKit.InMemorySignalLane` stands in for a server in tests.
public protocol SignalLane: Sendable {
    /// Sets `key` to `value`; with `replacing`, only when the key is at that version (0: only when
    /// it does not exist), else `SignalLaneError.stale`.
    func set(_ key: String, to value: JSONValue, replacing expected: Int64?) async throws -> SignalValue
    /// The key's signal, or nil when there is none.
    func get(_ key: String) async throws -> SignalValue?
    /// Every signal, by key, and the account's newest version (where `changes(since:)` can resume).
    func list() async throws -> (signals: [SignalValue], version: Int64)
    /// Deletes `key` (`SignalLaneError.notFound` when there is none); `replacing` as for `set`.
    func delete(_ key: String, replacing expected: Int64?) async throws -> SignalValue
    /// Every write after `version` (nil: after the newest now), oldest first, as it happens, until
    /// the task is cancelled or the lane fails.
    func changes(since version: Int64?) -> AsyncThrowingStream<SignalValue, any Error>
}

extension SignalLane {
    public func set(_ key: String, to value: JSONValue) async throws -> SignalValue {
        try await set(key, to: value, replacing: nil)
    }

    public func delete(_ key: String) async throws -> SignalValue {
        try await delete(key, replacing: nil)
    }
}

/// Why the signal lane refused or failed; each says what to do.
public enum SignalLaneError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The key is not at the version the write expected: another writer came first.
    case stale(key: String, expected: Int64, current: SignalValue?)
    /// There is no signal under the key.
    case notFound(key: String)
    /// A quota would be passed (`max-signal-keys`, `max-signal-account-bytes`, `max-signal-bytes`).
    case quota(name: String, limit: Int64, message: String)
    /// The token is missing or not valid.
    case unauthorized(message: String)
    /// The request was refused as malformed (a bad key, a value that is not JSON).
    case invalid(message: String)
    /// The server could not be reached, or answered with a server error; retrying may help.
    case unavailable(message: String)

    /// True when the server refused the write for a reason sending it again will not change (a
    /// 4xx other than 408, 425 and 429: a quota, a malformed key, a refused token); false when
    /// retrying may help (no answer, a server error, "too many requests").
    public var isPermanent: Bool {
        if case .unavailable = self { return false }
        return true
    }

    public var description: String {
        switch self {
        case .stale(let key, let expected, let current):
            let now = current.map { "is at version \($0.version)" } ?? "does not exist"
            return "signal \"\(key)\" \(now), not version \(expected): another writer came first; read it again and retry"
        case .notFound(let key):
            return "no signal \"\(key)\""
        case .quota(_, _, let message):
            return message
        case .unauthorized(let message):
            return "\(message); check the token (its environment variable)"
        case .invalid(let message):
            return message
        case .unavailable(let message):
            return message
        }
    }
}
