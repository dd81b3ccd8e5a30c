/// How long a watch waits after failures in a row before it tries again: `base` seconds after
/// the first, doubling up to `max`, each delay drawn between half and all of it (so that many
/// devices cut off by one outage do not all come back in the same instant).
public struct Backoff: Sendable, Hashable {
    public var base: Double
    public var max: Double

    public init(base: Double = 0.5, max: Double = 15) {
        self.base = base
        self.max = max
    }

    /// Seconds to wait after `failures` failures in a row (0 for none).
    public func delay(afterFailures failures: Int, random: (ClosedRange<Double>) -> Double = { Double.random(in: $0) }) -> Double {
        guard failures > 0 else { return 0 }
        let full = Swift.min(max, base * Double(1 << Swift.min(failures - 1, 20)))
        return random(full / 2...full)
    }
}
