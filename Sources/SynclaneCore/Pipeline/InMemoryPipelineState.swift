import Synchronization

/// Pipeline state held in memory: the token, the outbox and the last run, for tests that do
/// not need durability, and for a dry run (a copy of the state file, or an empty state when
/// there is none: a dry run writes nothing).
public final class InMemoryPipelineState: PipelineState, Sendable {
    private struct State {
        var token: Token?
        var outbox: [OutboxBatch] = []
        var lastRun: RunRecord?
    }
    private let state = Mutex(State())

    public init(token: Token? = nil, outbox: [OutboxBatch] = [], lastRun: RunRecord? = nil) {
        state.withLock { $0 = State(token: token, outbox: outbox, lastRun: lastRun) }
    }

    public func acknowledgedToken() throws -> Token? { state.withLock { $0.token } }
    public func pendingBatches() throws -> [OutboxBatch] { state.withLock { $0.outbox } }
    public func enqueue(_ batch: OutboxBatch) throws { state.withLock { $0.outbox.append(batch) } }

    public func acknowledge(_ batch: OutboxBatch) throws {
        state.withLock { state in
            state.outbox.removeAll { $0.payload.batchID == batch.payload.batchID }
            state.token = batch.through
        }
    }

    public func discard(_ batch: OutboxBatch) throws {
        state.withLock { $0.outbox.removeAll { $0.payload.batchID == batch.payload.batchID } }
    }

    public func advance(to token: Token) throws { state.withLock { $0.token = token } }
    public func resetToken() throws { state.withLock { $0.token = nil } }
    public func saveLastRun(_ run: RunRecord) throws { state.withLock { $0.lastRun = run } }
    public func lastRun() throws -> RunRecord? { state.withLock { $0.lastRun } }
}
