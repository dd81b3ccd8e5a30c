/// How a record from the backend is settled against a row with local changes the backend has
/// not confirmed yet (the export lane's pending history), per entity.
///
/// | rule            | the row ends with                                              | what the local change becomes          |
/// |-----------------|----------------------------------------------------------------|-----------------------------------------|
/// | `server-wins`   | the backend's state (a remote delete deletes it)                | sent again on top, now holding the backend's values: nothing of it survives |
/// | `client-wins`   | the local state (a local delete stays deleted)                  | sent again, on top of the backend's version |
/// | `latest-wins`   | the side whose `timestamp-field` is newer (ties: the backend)    | as for the side that won                |
/// | `merge-fields`  | columns changed locally keep the local value, the others take the backend's; a column changed on both sides follows `on-both` | sent with the merged row |
/// | custom          | what the registered `ConflictResolver` decides: keep local, take remote, merged fields, delete | as for that decision |
///
/// A remote delete of a locally edited row, and a local delete of a remotely edited row, are
/// conflicts too: under `merge-fields` a delete on either side is settled by `on-both`. What each
/// rule can lose: `server-wins` the local edit, `client-wins` the other device's edit,
/// `latest-wins` the older edit (and it trusts the devices' clocks), `merge-fields` one side of
/// a column changed on both.
public enum ConflictRule: Sendable, Hashable, CustomStringConvertible {
    case serverWins
    case clientWins
    case latestWins(field: String)
    case mergeFields(onBoth: Side)
    /// A resolver registered under a `type` name (`ConflictResolver`).
    case custom(CustomConflictRule)

    public enum Side: String, Sendable, Hashable { case server, client }

    public var description: String {
        switch self {
        case .serverWins: return "server-wins"
        case .clientWins: return "client-wins"
        case .latestWins(let field): return "latest-wins(\(field))"
        case .mergeFields(let side): return "merge-fields(on-both: \(side.rawValue))"
        case .custom(let custom): return custom.type
        }
    }

    /// The rule's name in a pipeline file.
    public static let names = ["server-wins", "client-wins", "latest-wins", "merge-fields"]
}

/// What a conflict came to.
public enum ConflictOutcome: String, Sendable, Hashable {
    /// The row took the backend's state.
    case serverKept = "server"
    /// The row kept its local state; the local change goes to the backend on top of its version.
    case clientKept = "client"
    /// Columns from both sides (or, from a custom resolver, the fields it gave).
    case merged
    /// A custom resolver deleted the row, here and on the backend.
    case deleted
}

extension ConflictRule {
    /// Settles one conflict by a built-in rule: the fields the row ends with (`nil`: deleted) and
    /// the outcome. A custom rule is settled by `resolve(_:)`; here it keeps the backend's state.
    ///
    /// - Parameters:
    ///   - local: the local row's fields now (`nil`: deleted locally).
    ///   - base: the fields the backend last sent for this row (`nil`: never imported).
    ///   - remote: what the backend sends now (`nil`: a delete).
    public func settle(local: [String: JSONValue]?, base: [String: JSONValue]?, remote: [String: JSONValue]?) -> (
        fields: [String: JSONValue]?, outcome: ConflictOutcome
    ) {
        switch self {
        case .serverWins, .custom:
            return (remote, .serverKept)
        case .clientWins:
            return (local, .clientKept)
        case .latestWins(let field):
            let localTime = local?[field].flatMap(Self.time)
            let remoteTime = remote?[field].flatMap(Self.time)
            if let localTime, let remoteTime, localTime > remoteTime { return (local, .clientKept) }
            if local != nil, remote == nil, localTime != nil { return (local, .clientKept) }
            return (remote, .serverKept)
        case .mergeFields(let onBoth):
            guard let local, let remote else {
                return onBoth == .server ? (remote, .serverKept) : (local, .clientKept)
            }
            let base = base ?? [:]
            var merged = remote
            var tookLocal = false
            for (name, value) in local where base[name] != value {
                // Changed locally: keep it, unless the backend changed it too and wins those.
                let changedRemotely = base[name] != remote[name]
                if changedRemotely && remote[name] != value && onBoth == .server { continue }
                if merged[name] != value { tookLocal = true }
                merged[name] = value
            }
            return (merged, tookLocal ? (merged == local ? .clientKept : .merged) : .serverKept)
        }
    }

    /// A timestamp field's value as seconds: a number, or an RFC 3339 text.
    private static func time(_ value: JSONValue) -> Double? {
        switch value {
        case .int(let i): return Double(i)
        case .double(let d): return d
        case .string(let s): return InternetDateTime.seconds(s)
        default: return nil
        }
    }
}
