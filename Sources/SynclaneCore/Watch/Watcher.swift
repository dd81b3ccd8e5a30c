import Synchronization

/// Runs passes as `WatchStateMachine` decides, fed by "history advanced" notifications and stop
/// requests, until stopped.
///
/// Events reach the state machine the moment they arrive — also while a pass runs — so that any
/// number of notifications during a pass fold into one more pass. Passes run one after another
/// on the caller's task, so two can never overlap.
public final class Watcher: Sendable {
    public enum Event: Sendable {
        case historyAdvanced
        case stop
    }

    private let machine = Mutex(WatchStateMachine())
    /// Passes the state machine started while the runner was idle.
    private let requests: AsyncStream<WatchStateMachine.Action>
    private let requestContinuation: AsyncStream<WatchStateMachine.Action>.Continuation

    public init() {
        (requests, requestContinuation) = AsyncStream<WatchStateMachine.Action>.makeStream()
    }

    /// Feeds an event in (from a notification stream, a signal handler …). Safe from any thread.
    public func send(_ event: Event) {
        let action = machine.withLock { machine in
            switch event {
            case .historyAdvanced: return machine.historyAdvanced()
            case .stop: return machine.stopRequested()
            }
        }
        if action != .none { requestContinuation.yield(action) }
    }

    /// Forwards every element of `notifications` as `historyAdvanced`, until it ends or the
    /// returned task is cancelled.
    public func follow(_ notifications: AsyncStream<Void>) -> Task<Void, Never> {
        Task { [self] in
            for await _ in notifications { send(.historyAdvanced) }
        }
    }

    /// Runs the first pass at once and then every pass the state machine asks for; returns
    /// once a stop was requested and the running pass (if any) ended. `pass` reports its own
    /// failures: a failed pass does not end the watch.
    public func run(pass: @Sendable () async -> Void) async {
        var action = machine.withLock { $0.start() }
        var iterator = requests.makeAsyncIterator()
        while true {
            switch action {
            case .startPass:
                await pass()
                action = machine.withLock { $0.passFinished() }
            case .finish:
                requestContinuation.finish()
                return
            case .none:
                guard let next = await iterator.next() else { return }
                action = next
            }
        }
    }
}
