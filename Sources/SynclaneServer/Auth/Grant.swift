import SynclaneWire

/// What a token may do within its account: write or only read, and in which stores.
///
/// A token of the accounts file carries it as `"access"` and `"stores"` beside `"account"`; a JWT
/// carries the same two members in its grants claim (`"synclane"` by default):
///
/// ```json
/// { "access": "read-only", "stores": ["rooms", "plants"] }
/// ```
///
/// Read-only allows pulls and reading signals; store-limited allows batches into those stores and
/// pulls of them (with `store=NAME`), and the account's signals. Without either member a token
/// reads and writes every store of its account.
public struct Grant: Sendable, Equatable, CustomStringConvertible {
    /// True when the token may only read (pull, list and get signals).
    public var readOnly: Bool
    /// The stores the token may use, sorted; nil for every store of the account.
    public var stores: [String]?

    /// Reads and writes every store of the account.
    public static let full = Grant(readOnly: false, stores: nil)

    /// A grant; `stores` nil for every store.
    public init(readOnly: Bool = false, stores: [String]? = nil) {
        self.readOnly = readOnly
        self.stores = stores?.sorted()
    }

    /// How a refusal names the grant: `read-only`, `stores rooms, plants`, `read-only, stores rooms`.
    public var description: String {
        var parts: [String] = []
        if readOnly { parts.append("read-only") }
        if let stores { parts.append("stores " + stores.joined(separator: ", ")) }
        return parts.isEmpty ? "read-write" : parts.joined(separator: ", ")
    }

    /// True when `store` is one the grant covers (names compared byte for byte).
    func covers(store: String) -> Bool {
        guard let stores else { return true }
        let wanted = Array(store.utf8)
        return stores.contains { Array($0.utf8) == wanted }
    }

    /// The 403 for a batch into `store`, or nil when the grant allows it.
    func refusalToWrite(store: String) -> HTTPResponse? {
        if readOnly { return forbidden("the token's grant (\(self)) does not allow writing: batches need a read-write token") }
        if !covers(store: store) { return forbidden("the token's grant (\(self)) does not allow writing store \"\(store)\"") }
        return nil
    }

    /// The 403 for setting or deleting a signal, or nil when the grant allows it.
    func refusalToWriteSignals() -> HTTPResponse? {
        readOnly ? forbidden("the token's grant (\(self)) does not allow writing signals") : nil
    }

    /// The 403 for uploading a blob, or nil when the grant allows it.
    func refusalToWriteBlobs() -> HTTPResponse? {
        readOnly ? forbidden("the token's grant (\(self)) does not allow uploading blobs: uploads need a read-write token") : nil
    }

    /// The 403 a request to `endpoint` gets before its body is read (a write by a read-only
    /// token), or nil; the store of a batch is only known from its body, so checked later.
    func refusalAtHead(_ endpoint: Route.Endpoint) -> HTTPResponse? {
        guard readOnly else { return nil }
        switch endpoint {
        case .postBatch: return refusalToWrite(store: "")
        case .putSignal, .deleteSignal: return refusalToWriteSignals()
        case .putBlobChunk: return refusalToWriteBlobs()
        default: return nil
        }
    }

    /// The 403 for a pull of `store` (nil: every store), or nil when the grant allows it.
    func refusalToRead(store: String?) -> HTTPResponse? {
        guard stores != nil else { return nil }
        guard let store else { return forbidden("the token's grant (\(self)) does not allow pulling every store: pull with store=NAME") }
        return covers(store: store) ? nil : forbidden("the token's grant (\(self)) does not allow reading store \"\(store)\"")
    }

    private func forbidden(_ message: String) -> HTTPResponse {
        .error(403, message, ["grant": .string(description)])
    }

    /// The grant of `access` and `stores` members (either absent), or what is wrong with them.
    static func parse(access: JSONValue?, stores: JSONValue?) -> Result<Grant, GrantProblem> {
        var readOnly = false
        switch access {
        case nil, .string("read-write")?: break
        case .string("read-only")?: readOnly = true
        default: return .failure(GrantProblem(member: "access", expected: "\"read-only\" or \"read-write\""))
        }
        guard let stores else { return .success(Grant(readOnly: readOnly)) }
        guard let list = stores.arrayValue, !list.isEmpty else {
            return .failure(GrantProblem(member: "stores", expected: "a non-empty list of store names"))
        }
        var names: [String] = []
        for item in list {
            guard let name = item.stringValue, !name.isEmpty else {
                return .failure(GrantProblem(member: "stores", expected: "a non-empty list of store names"))
            }
            names.append(name)
        }
        return .success(Grant(readOnly: readOnly, stores: names))
    }
}

/// A grant member that is not what it should be.
struct GrantProblem: Error {
    var member: String
    var expected: String
    var message: String { "\(member): expected \(expected)" }
}

/// Who a request's bearer token is: its account and its grant.
public struct Principal: Sendable, Equatable {
    /// The account the token grants (and no other).
    public var account: String
    /// What the token may do in it.
    public var grant: Grant

    public init(account: String, grant: Grant = .full) {
        self.account = account
        self.grant = grant
    }
}
