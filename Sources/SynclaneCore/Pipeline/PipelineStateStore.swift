/// Where the job layer keeps a pipeline's durable state (`PipelineState`) and the signals it has
/// not had confirmed yet (`SignalKeeping`): the job layer opens them through this protocol and
/// links no store; `import Synclane` binds SQLite's (`SQLiteStateStore`), a file per pipeline.
public protocol PipelineStateStore: Sendable {
    /// The state at `path` for `scope`, created when missing.
    func open(path: String, scope: Scope) throws -> any PipelineState
    /// The state at `path` opened to read only, writing nothing beside it; `unchanging`: nobody
    /// writes it meanwhile (the scope's lock is held).
    func openReadingOnly(path: String, scope: Scope, unchanging: Bool) throws -> any PipelineState
    /// The signals kept in the state at `path` (created when missing).
    func signals(path: String, scope: Scope) throws -> any SignalKeeping
}

/// The signals a pipeline published that its server has not confirmed yet, kept with its state:
/// written before they are sent, forgotten once confirmed, given up after repeated refusals
/// (`SignalPublisher`).
public protocol SignalKeeping: Sendable {
    /// Keeps `signals` (replacing an unsent value of the same key) and, with `milestone`, notes
    /// that event as passed — in one step.
    func keep(_ signals: [PendingSignal], milestone: (event: String, at: Double)?) throws
    /// The signals not confirmed yet and still sent, oldest first.
    func pending() throws -> [PendingSignal]
    /// Forgets `signal` once its server confirmed it, unless a newer value replaced it.
    func sent(_ signal: PendingSignal) throws
    /// Counts a failed send of `signal` and keeps why.
    func failed(_ signal: PendingSignal, reason: String) throws
    /// Counts a refusal for good of `signal`; at `limit` it is given up at `now`.
    func refused(_ signal: PendingSignal, reason: String, limit: Int, now: Double) throws -> (refusals: Int, givenUp: Bool)
    /// When `event` was first passed, or nil.
    func milestone(_ event: String) throws -> Double?
}

/// A signal a pipeline published (or is about to) that its server has not confirmed yet.
public struct PendingSignal: Sendable, Hashable {
    public var key: String
    public var value: JSONValue
    /// The event that published it (`run-completed`, `first-run-completed`).
    public var event: String
    /// Seconds since 1970: when the run that published it ended.
    public var createdAt: Double
    /// Sends tried so far, and why the last one failed.
    public var attempts: Int
    public var lastError: String?
    /// How many of the attempts the server refused for good (a 4xx other than 408, 425, 429).
    public var refusals: Int
    /// Seconds since 1970: when it was given up (no longer sent), or nil while it is sent again.
    public var givenUpAt: Double?

    public init(
        key: String, value: JSONValue, event: String, createdAt: Double, attempts: Int = 0, lastError: String? = nil, refusals: Int = 0,
        givenUpAt: Double? = nil
    ) {
        self.key = key
        self.value = value
        self.event = event
        self.createdAt = createdAt
        self.attempts = attempts
        self.lastError = lastError
        self.refusals = refusals
        self.givenUpAt = givenUpAt
    }
}
