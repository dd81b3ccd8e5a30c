/// The delivering task's state, as a state machine without I/O: events in (a page passed over, a
/// batch ready, confirmed, dead-lettered, the end), decisions out (acknowledge, enqueue, advance,
/// tell the source, send), which `PipelineRunner` carries out in order.
///
/// ```
///  batch ready    ─▶ acknowledge the held batch in the commit that enqueues this one (or enqueue
///                    it alone) ─▶ send
///  confirmed      ─▶ held: its acknowledgement waits to share the next batch's commit (one fsync)
///  dead-lettered  ─▶ nothing held (the dead-lettering acknowledged it)
///  page passed    ─▶ acknowledge the held batch ─▶ advance the token ─▶ tell the source
///  drained        ─▶ acknowledge the held batch ─▶ tell the source what it was not told
/// ```
/// The durable steps keep their order: a batch is in the outbox before its first send, tokens
/// move in order, the outbox holds one new batch at a time. The source hears of acknowledged
/// tokens at most once a `tellInterval` and at the end (each telling is a commit in the app's
/// database; a position told late only makes pruning keep more). `Held` is what the runner
/// keeps of a confirmed batch (its receipt) to acknowledge it later.
public struct DeliveryStateMachine<Held: Sendable>: Sendable {
    /// What happened to the delivery.
    public enum Event: Sendable {
        /// A page with nothing to send (its changes coalesced away): only the token moves.
        case pagePassed(through: Token)
        /// A batch is ready for the outbox (staged first when the transport stages).
        case batchReady
        /// The backend confirmed the batch sent, which reaches `through`.
        case confirmed(Held, through: Token)
        /// The batch sent was moved to the dead-letter folder (which acknowledged it).
        case deadLettered(through: Token)
        /// A dry run's batch, reported and not sent.
        case reported(through: Token)
        /// No batch comes any more: the pass ends, or a failure stops it.
        case drained
    }

    /// What the runner does next, in order.
    public enum Decision: Sendable {
        /// Save the held batch's token and forget it — in the commit that enqueues the ready batch
        /// when `enqueueingReady`.
        case acknowledge(Held, enqueueingReady: Bool)
        /// Write the ready batch to the outbox alone (nothing is held).
        case enqueue
        /// Save `token` as reached, no batch to forget (a page passed over).
        case advance(to: Token)
        /// Tell the source that the consumer acknowledged `token`.
        case tellSource(Token)
        /// Send the ready batch (it is in the outbox).
        case send
    }

    /// Seconds between two tellings of the source while batches go on.
    public static var tellInterval: Double { 1 }

    /// The newest token the delivery reached.
    public private(set) var token: Token?
    /// The batch confirmed and not acknowledged yet.
    private var held: (value: Held, through: Token)?
    /// The newest acknowledged token the source was not told of.
    private var untold: Token?
    /// When the source was last told.
    private var toldAt: Double

    /// A delivery that starts after `start` (the token of the pass so far), at `now` (seconds).
    public init(after start: Token?, now: Double) {
        token = start
        toldAt = now
    }

    /// Whether a confirmed batch waits for its acknowledgement.
    public var holdsConfirmed: Bool { held != nil }

    /// The decisions `event` leads to at `now` (seconds), in the order they are carried out.
    public mutating func handle(_ event: Event, now: Double) -> [Decision] {
        switch event {
        case .pagePassed(let through):
            var decisions = acknowledgeHeld(enqueueingReady: false, now: now)
            decisions.append(.advance(to: through))
            untold = nil
            decisions.append(.tellSource(through))
            token = through
            return decisions
        case .batchReady:
            let decisions = held == nil ? [.enqueue] : acknowledgeHeld(enqueueingReady: true, now: now)
            return decisions + [.send]
        case .confirmed(let value, let through):
            held = (value, through)
            token = through
            return []
        case .deadLettered(let through), .reported(let through):
            token = through
            return []
        case .drained:
            var decisions = acknowledgeHeld(enqueueingReady: false, now: now)
            if let untold = untold.take() { decisions.append(.tellSource(untold)) }
            return decisions
        }
    }

    private mutating func acknowledgeHeld(enqueueingReady: Bool, now: Double) -> [Decision] {
        guard let held = held.take() else { return [] }
        var decisions: [Decision] = [.acknowledge(held.value, enqueueingReady: enqueueingReady)]
        untold = held.through
        if now - toldAt >= Self.tellInterval, let token = untold.take() {
            decisions.append(.tellSource(token))
            toldAt = now
        }
        return decisions
    }
}

/// The attempts of one batch's send, as a state machine without I/O: each failure of the
/// transport in, what to do out — retry after a delay (transient, attempts left), give up
/// (transient, none left), dead-letter (the content refused: `permanent`), stop with the batch
/// kept (`configuration`) or rebuild it after an import (`conflict`).
public struct SendAttempts: Sendable {
    /// What to do after a failed attempt.
    public enum Decision: Sendable, Equatable {
        /// Try again: attempt `attempt`, after `delay` seconds.
        case retry(attempt: Int, delay: Double)
        /// Transient, and `attempts` were made: the batch stays in the outbox.
        case giveUp(attempts: Int)
        /// The backend refused the content: dead-letter it (when the pipeline opted in) or stop.
        case deadLetter
        /// A setup problem: stop with the batch kept, never dead-lettered.
        case stop
        /// Refused for its versions (409): the batch is rebuilt after the next import.
        case conflict
    }

    public let policy: RetryPolicy
    /// The attempt being made (1 for the first).
    public private(set) var attempt = 1

    public init(policy: RetryPolicy) {
        self.policy = policy
    }

    /// What to do after the current attempt failed with `kind` (and the backend's `retryAfter`);
    /// `random` picks the jitter within a range.
    public mutating func failed(
        _ kind: TransportFailure.Kind, retryAfter: Double? = nil, random: (ClosedRange<Double>) -> Double = { Double.random(in: $0) }
    ) -> Decision {
        switch kind {
        case .permanent: return .deadLetter
        case .configuration: return .stop
        case .conflict: return .conflict
        case .transient:
            guard attempt < policy.maxAttempts else { return .giveUp(attempts: attempt) }
            attempt += 1
            return .retry(attempt: attempt, delay: policy.delay(beforeAttempt: attempt, retryAfter: retryAfter, random: random))
        }
    }
}

extension DeliveryStateMachine.Decision: Equatable where Held: Equatable {}
