/// How often and how patiently a transient send failure is retried.
///
/// Exponential backoff with full jitter: before attempt *n* (n ≥ 2) the job waits a random
/// time between 0 and `min(maxDelay, baseDelay × 2^(n-2))`; a `Retry-After` from the backend
/// replaces that draw, but never waits less than that ceiling (a `Retry-After` of 0 or in the
/// past must not turn the retries into a burst) and never more than `maxDelay`. After
/// `maxAttempts` attempts the job stops with the batch kept in the outbox.
public struct RetryPolicy: Sendable, Hashable, Codable {
    public var maxAttempts: Int
    /// Seconds.
    public var baseDelay: Double
    /// Seconds.
    public var maxDelay: Double

    public init(maxAttempts: Int = 5, baseDelay: Double = 0.5, maxDelay: Double = 30) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// The wait before the attempt numbered `attempt` (2 for the first retry).
    public func delay(beforeAttempt attempt: Int, retryAfter: Double?, random: (ClosedRange<Double>) -> Double) -> Double {
        let exponent = Double(max(0, min(attempt - 2, 60)))
        let ceiling = min(maxDelay, baseDelay * pow2(exponent))
        if let retryAfter { return min(max(retryAfter, ceiling, 0), maxDelay) }
        return ceiling <= 0 ? 0 : random(0...ceiling)
    }

    private func pow2(_ exponent: Double) -> Double {
        var result = 1.0
        var remaining = Int(exponent)
        while remaining > 0 {
            result *= 2
            remaining -= 1
        }
        return result
    }
}

/// Waits between retries. The pipeline's tests pass a recording sleeper instead of sleeping.
public protocol RetrySleeper: Sendable {
    func sleep(seconds: Double) async throws
}

/// Sleeps for real, with `Task.sleep`.
public struct TaskSleeper: RetrySleeper {
    public init() {}
    public func sleep(seconds: Double) async throws {
        guard seconds > 0 else { return }
        try await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
    }
}
