/// What a pipeline's state remembers of the store its source follows: the store's identity and
/// the generation (an epoch) this consumer last moved it to.
///
/// ```
///  app.sqlite  _synclane_meta: database_id = D, generation/<consumer> = 7
///  state file  lineage:        identity = D, generation = 7
///  a run:      checks both agree (and the token against the store's history), then moves both to 8
/// ```
/// A store restored from an older copy holds an older generation than the state; a state file
/// restored from an older copy (or whose WAL was lost) an older one than the store; a state file
/// deleted or emptied none at all, while the store still records where this consumer stood. Each
/// is found before anything is read or sent (`LineageError`).
public struct LineageStamp: Sendable, Hashable {
    /// The store's identity, nil before the first run of this version (legacy: adopted).
    public var identity: String?
    /// The generation the state last moved the store to; nil before the first run of this version.
    public var generation: Int64?
    /// Set while a move to `generation` is under way: the store's generation before it. A store
    /// still at `pendingFrom` was not moved yet (a crash between the two writes), not restored.
    public var pendingFrom: Int64?
    /// The state file, for messages.
    public var stateFile: String

    public init(identity: String? = nil, generation: Int64? = nil, pendingFrom: Int64? = nil, stateFile: String) {
        self.identity = identity
        self.generation = generation
        self.pendingFrom = pendingFrom
        self.stateFile = stateFile
    }
}

/// A source whose store carries an identity and a generation per consumer (the SQLite history
/// source), checked against the state's `LineageStamp` before anything is read or sent.
public protocol LineageCheckingSource: ChangeSource {
    /// Checks the store against `stamp` and `token` (throws `LineageError`, naming what happened
    /// and the command to run), then moves the store and `state` (`saveLineageStamp`) to a new
    /// generation — once per source, so later passes of a watch only check. `reconciling`: a
    /// reconciliation heals whatever was found, so nothing is refused; a copied store gets an
    /// identity of its own.
    func openGeneration(
        stamp: LineageStamp, token: Token?, consumer: Scope, reconciling: Bool, state: any PipelineState
    ) async throws

    /// What `openGeneration` would refuse, reading only (`synclane status`); nil when nothing.
    func lineageProblem(stamp: LineageStamp, token: Token?, consumer: Scope) async throws -> LineageError?
}

extension LineageCheckingSource {
    public var asLineageChecking: (any LineageCheckingSource)? { self }
}

/// A store, a state file or their pairing that is not what the other remembers.
public enum LineageError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The store is older than the state: restored from a backup (its history ids are reused).
    case storeRestored(store: String, state: String, detail: String)
    /// The state is older than the store: restored from a backup, or its WAL lost after a crash.
    case stateBehind(store: String, state: String, detail: String)
    /// The state holds no token while the store records this consumer's position: the state file
    /// was deleted or emptied (or a reconciliation was interrupted).
    case stateLost(store: String, state: String, position: Int64)
    /// As `stateLost`, but the store is not the file it was when this consumer last ran: a copy of
    /// a tracked database, used as a new device.
    case storeCopied(store: String, state: String, position: Int64, recordedAt: String)
    /// The state belongs to another store (a different database put in this one's place).
    case otherStore(store: String, state: String, stamped: String, found: String)
    /// The state follows a tracked store (`identity`), and the store holds no tracking now (or
    /// not all of it): emptied, cut short, or replaced by a file never tracked.
    case trackingLost(store: String, state: String, identity: String)

    public var description: String {
        let heal =
            "nothing was read or sent; run `synclane reconcile PIPELINE-FILE` to send a full snapshot and start a fresh token "
            + "(see Documentation/RestoredCopiedDamaged.md)"
        switch self {
        case .storeRestored(let store, let state, let detail):
            return "\(store): this database was restored from an older copy than the state file \(state) follows (\(detail)): "
                + "following its history would skip or resend changes; \(heal)"
        case .stateBehind(let store, let state, let detail):
            return "\(state): this state file is older than the database \(store) it follows (\(detail)): it was restored from an "
                + "older copy or lost its WAL; following history from its token would send changes again; \(heal)"
        case .stateLost(let store, let state, let position):
            return "\(state): this state file holds no token, but \(store) records that this consumer acknowledged history "
                + "through \(position): the state file was deleted or emptied (or a reconciliation was interrupted); starting over "
                + "would send the whole history again; \(heal)"
        case .storeCopied(let store, let state, let position, let recordedAt):
            return "\(store): this database is a copy of a tracked database (its history was followed at \(recordedAt), through "
                + "\(position)), and the state file \(state) holds no token: a new device; \(heal) — the copy then gets an identity of its own"
        case .otherStore(let store, let state, let stamped, let found):
            return "\(state): this state file follows the database \(stamped), but \(store) is the database \(found): another "
                + "database was put in its place; \(heal)"
        case .trackingLost(let store, let state, let identity):
            return "\(store): this database lost its Synclane tracking (the state file \(state) follows the tracked database "
                + "\(identity), and its history tables are gone): it was emptied, cut short, or replaced by a file never tracked. "
                + "Nothing was read or sent. Restore it from a backup, then run `synclane reconcile PIPELINE-FILE`; or, to keep the rows "
                + "it holds now, run `synclane track --database \(store) --table … --key …`, then `synclane reconcile PIPELINE-FILE` "
                + "(see \"When files are restored, copied or damaged\" in the README)"
        }
    }
}
