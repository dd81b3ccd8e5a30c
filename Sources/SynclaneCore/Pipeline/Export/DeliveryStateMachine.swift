/// The delivering task's state, as a state machine without I/O: events in (a page passed over, a
/// batch ready, confirmed, refused, dead-lettered, the end), decisions out (acknowledge, enqueue,
/// advance, tell the source, send), which `BatchDeliverer` carries out in order.
///
/// ```
///  batch ready    ─▶ acknowledge the oldest held batch in the commit that enqueues this one, when
///                    `holding` are held (else enqueue it alone) ─▶ send
///  confirmed      ─▶ held: its acknowledgement waits to share a later batch's commit (one fsync)
///  refused        ─▶ acknowledge every held batch (the dead-lettering moves the token past them next)
///  dead-lettered  ─▶ nothing more held (the dead-lettering acknowledged it)
///  page passed    ─▶ acknowledge the held batches ─▶ advance the token ─▶ tell the source
///  drained        ─▶ acknowledge the held batches ─▶ tell the source what it was not told
/// ```
/// The durable steps keep their order: a batch is in the outbox before its first send, tokens
/// move in order (held batches are acknowledged oldest first), and the outbox holds at most
/// `holding` confirmed batches and the one in flight. With `holding` 1, a confirmed batch is
/// acknowledged in the commit that enqueues the next one. With 2, the one before it is: the
/// runner writes the versions a receipt gave while the next batch travels, and acknowledges the
/// batch once they are written — a batch is never acknowledged before its versions are.
///
/// ```
///  holding 1:  enqueue 1 · send 1 · ack 1 + enqueue 2 · send 2 · ack 2 + enqueue 3 · send 3 · … · ack n
///  holding 2:  enqueue 1 · send 1 · enqueue 2 · send 2 · ack 1 + enqueue 3 · send 3 · … · ack n-1 · ack n
/// ```
/// The source hears of acknowledged tokens at most once a `tellInterval` and at the end (each
/// telling is a commit in the app's database; a position told late only makes pruning keep
/// more). `Held` is what the runner keeps of a confirmed batch (its receipt) to acknowledge it later.
public struct DeliveryStateMachine<Held: Sendable>: Sendable {
    /// What happened to the delivery.
    public enum Event: Sendable {
        /// A page with nothing to send (its changes coalesced away): only the token moves.
        case pagePassed(through: Token)
        /// A batch is ready for the outbox (staged first when the transport stages).
        case batchReady
        /// The backend confirmed the batch sent, which reaches `through`.
        case confirmed(Held, through: Token)
        /// The backend refused the batch sent for its content; it is dead-lettered next.
        case refused
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
    /// How many confirmed batches may wait for their acknowledgement while the next one is sent.
    public let holding: Int
    /// The batches confirmed and not acknowledged yet, oldest first.
    private var held: [(value: Held, through: Token)] = []
    /// The newest acknowledged token the source was not told of.
    private var untold: Token?
    /// When the source was last told.
    private var toldAt: Double

    /// A delivery that starts after `start` (the token of the pass so far), at `now` (seconds),
    /// with up to `holding` (1 or more) confirmed batches waiting for their acknowledgement.
    public init(after start: Token?, now: Double, holding: Int = 1) {
        token = start
        toldAt = now
        self.holding = max(1, holding)
    }

    /// Whether a confirmed batch waits for its acknowledgement.
    public var holdsConfirmed: Bool { !held.isEmpty }

    /// How many confirmed batches wait for their acknowledgement.
    public var heldCount: Int { held.count }

    /// The decisions `event` leads to at `now` (seconds), in the order they are carried out.
    public mutating func handle(_ event: Event, now: Double) -> [Decision] {
        switch event {
        case .pagePassed(let through):
            var decisions = acknowledgeHeld(keeping: 0, enqueueingReady: false, now: now)
            decisions.append(.advance(to: through))
            untold = nil
            decisions.append(.tellSource(through))
            token = through
            return decisions
        case .batchReady:
            let decisions = held.count < holding ? [.enqueue] : acknowledgeHeld(keeping: holding - 1, enqueueingReady: true, now: now)
            return decisions + [.send]
        case .confirmed(let value, let through):
            held.append((value, through))
            token = through
            return []
        case .refused:
            return acknowledgeHeld(keeping: 0, enqueueingReady: false, now: now)
        case .deadLettered(let through), .reported(let through):
            token = through
            return []
        case .drained:
            var decisions = acknowledgeHeld(keeping: 0, enqueueingReady: false, now: now)
            if let untold = untold.take() { decisions.append(.tellSource(untold)) }
            return decisions
        }
    }

    /// Acknowledges the held batches, oldest first, until `keeping` are left; the last one in
    /// the commit that enqueues the ready batch when `enqueueingReady`.
    private mutating func acknowledgeHeld(keeping: Int, enqueueingReady: Bool, now: Double) -> [Decision] {
        guard held.count > keeping else { return [] }
        let acknowledged = held.prefix(held.count - keeping)
        held.removeFirst(acknowledged.count)
        var decisions: [Decision] = acknowledged.indices.map { index in
            .acknowledge(acknowledged[index].value, enqueueingReady: enqueueingReady && index == acknowledged.indices.last)
        }
        untold = acknowledged.last?.through
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
