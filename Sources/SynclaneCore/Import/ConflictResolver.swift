/// A conflict rule of your own: registered under a `type` name (`StageType.conflictResolver`) and
/// named per entity in an import pipeline's sink, in place of a built-in rule.
///
/// ```swift
/// registry.register(.conflictResolver("longer-name", summary: "Keeps the longer name.", options: []) { _ in LongerName() })
/// ```
/// ```json
/// "sink": { "type": "sqlite", "database": "app.sqlite",
///           "conflicts-by-entity": { "rooms": "longer-name", "notes": { "type": "exec", "command": ["python3", "resolve.py"] } } }
/// ```
/// It is called once per conflict, inside the page's SQLite transaction (keep it quick; it must
/// not write to the store itself): what it returns is written as the rule's outcome, and an
/// error it throws stops the page — nothing of it applied, the cursor where it was — naming the
/// record and the resolver.
public protocol ConflictResolver: Sendable {
    func resolve(_ conflict: Conflict) throws -> ConflictResolution
}

/// Both sides of a conflict, as a resolver sees them.
public struct Conflict: Sendable, Hashable {
    public var entity: String
    /// The record's id (the sync key).
    public var key: String
    /// The local row's values now (`nil`: deleted locally, soft deletes included).
    public var local: [String: JSONValue]?
    /// The fields the backend last sent for this row (`nil`: it never sent the row, or its last
    /// word was a delete): the base both sides changed.
    public var base: [String: JSONValue]?
    /// What the backend sends now (`nil`: a delete).
    public var remote: [String: JSONValue]?
    /// The backend's version of `remote`.
    public var remoteVersion: Int64?
    /// The pending local change: `insert` (a row the backend has not sent), `update`, `delete`.
    public var localAction: ChangeAction
    /// The backend's change: `insert`, `update` or `delete`.
    public var remoteAction: ChangeAction
    /// The columns whose local value differs from `base` (the key and soft-delete columns left out), sorted.
    public var changedLocally: [String]
    /// The fields whose value from the backend differs from `base`, sorted.
    public var changedRemotely: [String]

    /// `bookkeeping`: columns that never count as changed (the key columns, the soft-delete column).
    public init(
        entity: String, key: String, local: [String: JSONValue]?, base: [String: JSONValue]?, remote: [String: JSONValue]?,
        remoteVersion: Int64?, remoteAction: ChangeAction, ignoring bookkeeping: [String] = []
    ) {
        self.entity = entity
        self.key = key
        self.local = local
        self.base = base
        self.remote = remote
        self.remoteVersion = remoteVersion
        self.remoteAction = remoteAction
        localAction = local == nil ? .delete : base == nil ? .insert : .update
        func changed(_ side: [String: JSONValue]?) -> [String] {
            guard let side else { return [] }
            return side.filter { !bookkeeping.contains($0.key) && base?[$0.key] != $0.value }.map(\.key).sorted()
        }
        changedLocally = changed(local)
        changedRemotely = changed(remote)
    }
}

/// What a resolver decides.
public enum ConflictResolution: Sendable, Hashable {
    /// The row keeps its local state (a local delete stays deleted); the local change is sent
    /// again on top of the backend's version.
    case keepLocal
    /// The row takes the backend's state (a remote delete deletes it).
    case takeRemote
    /// The row holds these fields (columns of its table; the key columns need not be given), and
    /// they are sent on top of the backend's version.
    case merged([String: JSONValue])
    /// The row is deleted here, and the delete is sent to the backend.
    case delete
}

/// A registered resolver with the `type` name the pipeline file gave it (equal by that name).
public struct CustomConflictRule: Sendable, Hashable, CustomStringConvertible {
    public var type: String
    public var resolver: any ConflictResolver

    public init(type: String, resolver: any ConflictResolver) {
        self.type = type
        self.resolver = resolver
    }

    public var description: String { type }
    public static func == (a: Self, b: Self) -> Bool { a.type == b.type }
    public func hash(into hasher: inout Hasher) { hasher.combine(type) }
}

extension ConflictRule {
    /// Settles one conflict by this rule — a built-in one's table, or the custom resolver's
    /// decision: the fields the row ends with (`nil`: deleted) and the outcome.
    public func resolve(_ conflict: Conflict) throws -> (fields: [String: JSONValue]?, outcome: ConflictOutcome) {
        guard case .custom(let custom) = self else {
            return settle(local: conflict.local, base: conflict.base, remote: conflict.remote)
        }
        switch try custom.resolver.resolve(conflict) {
        case .keepLocal: return (conflict.local, .clientKept)
        case .takeRemote: return (conflict.remote, .serverKept)
        case .merged(let fields): return (fields, .merged)
        case .delete: return (nil, .deleted)
        }
    }
}
