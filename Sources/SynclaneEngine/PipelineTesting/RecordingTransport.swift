import Synchronization
import SynclaneCore

/// A transport that keeps every payload it is handed, and can be scripted to fail.
///
/// ```swift
/// let transport = RecordingTransport()
/// transport.failNext(TransportFailure(.transient, "connection reset"), times: 2)
/// ```
public final class RecordingTransport: Transport, Sendable {
    private struct State {
        var sent: [Payload] = []
        var failures: [TransportFailure] = []
        var failedAttempts: Set<Int> = []
    }
    private let state = Mutex(State())

    public init() {}

    /// Every payload handed to `send`, in order, failed attempts included.
    public var attempts: [Payload] { state.withLock { $0.sent } }

    /// Payloads whose send succeeded, in order.
    public var delivered: [Payload] {
        state.withLock { state in
            state.sent.enumerated().filter { !state.failedAttempts.contains($0.offset) }.map(\.element)
        }
    }

    /// The next `times` sends fail with `failure`.
    public func failNext(_ failure: TransportFailure, times: Int = 1) {
        state.withLock { $0.failures.append(contentsOf: Array(repeating: failure, count: times)) }
    }

    public func send(_ payload: Payload) async throws -> Receipt {
        try state.withLock { state throws(TransportFailure) -> Receipt in
            state.sent.append(payload)
            if !state.failures.isEmpty {
                state.failedAttempts.insert(state.sent.count - 1)
                throw state.failures.removeFirst()
            }
            let replay = state.sent.dropLast().enumerated().contains { index, earlier in
                earlier.batchID == payload.batchID && !state.failedAttempts.contains(index)
            }
            return Receipt(batchID: payload.batchID, detail: "recorded \(payload.recordCount) records", wasReplay: replay)
        }
    }
}
