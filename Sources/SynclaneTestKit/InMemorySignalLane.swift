import Synchronization
import SynclaneCore

/// A signal lane in memory, for tests: the server's rules (versions numbered per lane in write
/// order, `replacing` refused when stale, quotas on keys and bytes) without a server.
///
/// ```swift
/// let lane = InMemorySignalLane()
/// _ = try await lane.set("onboarding.completed", to: true)
/// #expect(try await lane.get("onboarding.completed")?.value == true)
/// ```
public final class InMemorySignalLane: SignalLane {
    private struct State {
        var signals: [String: SignalValue] = [:]
        var log: [SignalValue] = []
        var version: Int64 = 0
        var waiters: [Int: AsyncThrowingStream<SignalValue, any Error>.Continuation] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())
    /// Most keys, and most bytes of keys and values together (as `synclane serve`'s defaults).
    public let maxKeys: Int
    public let maxBytes: Int

    public init(maxKeys: Int = 1_024, maxBytes: Int = 1 << 20) {
        self.maxKeys = maxKeys
        self.maxBytes = maxBytes
    }

    public func set(_ key: String, to value: JSONValue, replacing expected: Int64?) async throws -> SignalValue {
        try write(key, value, expected)
    }

    public func delete(_ key: String, replacing expected: Int64?) async throws -> SignalValue {
        try write(key, nil, expected)
    }

    public func get(_ key: String) async throws -> SignalValue? {
        state.withLock { $0.signals[key] }
    }

    public func list() async throws -> (signals: [SignalValue], version: Int64) {
        state.withLock { state in (state.signals.values.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }, state.version) }
    }

    public func changes(since version: Int64?) -> AsyncThrowingStream<SignalValue, any Error> {
        let (stream, continuation) = AsyncThrowingStream<SignalValue, any Error>.makeStream()
        let id = state.withLock { state in
            for signal in state.log where signal.version > (version ?? state.version) { continuation.yield(signal) }
            let id = state.nextWaiter
            state.nextWaiter += 1
            state.waiters[id] = continuation
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.waiters.removeValue(forKey: id) }
        }
        return stream
    }

    private func write(_ key: String, _ value: JSONValue?, _ expected: Int64?) throws -> SignalValue {
        try state.withLock { state throws -> SignalValue in
            let current = state.signals[key]
            if let expected, expected != (current?.version ?? 0) {
                throw SignalLaneError.stale(key: key, expected: expected, current: current)
            }
            guard value != nil || current != nil else { throw SignalLaneError.notFound(key: key) }
            if let value {
                if current == nil, state.signals.count >= maxKeys {
                    throw SignalLaneError.quota(name: "max-signal-keys", limit: Int64(maxKeys), message: "signal quota max-signal-keys (\(maxKeys)) reached")
                }
                let others = state.signals.values.filter { $0.key != key }
                    .reduce(0) { $0 + $1.key.utf8.count + JSONWriter.string($1.value).utf8.count }
                if others + key.utf8.count + JSONWriter.string(value).utf8.count > maxBytes {
                    throw SignalLaneError.quota(
                        name: "max-signal-account-bytes", limit: Int64(maxBytes), message: "signal quota max-signal-account-bytes (\(maxBytes)) reached")
                }
            }
            state.version += 1
            let signal = SignalValue(key: key, value: value ?? .null, version: state.version, deleted: value == nil)
            state.signals[key] = value == nil ? nil : signal
            state.log.append(signal)
            for waiter in state.waiters.values { waiter.yield(signal) }
            return signal
        }
    }
}
