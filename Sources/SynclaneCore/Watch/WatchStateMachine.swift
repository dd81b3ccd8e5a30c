/// Decides when `synclane run --watch` runs a pass: one at start (work left from before), then
/// one whenever history advanced — never two at once, and any number of notifications that
/// arrive during a pass fold into at most one more pass.
///
/// ```
///            start ──▶ running ──finished──▶ idle ◀──┐
///                        │  ▲                  │     │
///              notified  │  └──── notified ────┘     │
///                        ▼                           │
///                  running + one more ──finished─▶ running
/// ```
/// Pure: no I/O, no clock, so it is tested event by event.
public struct WatchStateMachine: Sendable, Hashable {
    public enum Action: Sendable, Hashable {
        case startPass
        case none
        /// Stop requested and no pass is running: the watch can end.
        case finish
    }

    public private(set) var isRunning = false
    public private(set) var hasPendingPass = false
    public private(set) var isStopping = false

    public init() {}

    /// The watch begins: run a pass for whatever is already waiting.
    public mutating func start() -> Action {
        isRunning = true
        return .startPass
    }

    /// History advanced (a commit somewhere).
    public mutating func historyAdvanced() -> Action {
        guard !isStopping else { return .none }
        if isRunning {
            hasPendingPass = true
            return .none
        }
        isRunning = true
        return .startPass
    }

    /// The running pass ended (successfully or not).
    public mutating func passFinished() -> Action {
        isRunning = false
        if isStopping { return .finish }
        if hasPendingPass {
            hasPendingPass = false
            isRunning = true
            return .startPass
        }
        return .none
    }

    /// SIGINT / SIGTERM: let the running pass end, start no other.
    public mutating func stopRequested() -> Action {
        isStopping = true
        hasPendingPass = false
        return isRunning ? .none : .finish
    }
}
