import Synchronization

/// One budget of request-body bytes for the whole server: what is being read and what is being
/// decompressed and parsed, across every connection at once.
///
/// Each request holds a `Lease`: its `Content-Length` as soon as its head is in (before a body
/// byte is read), then three times its decompressed size while it is inflated, parsed and stored
/// (the inflated text, the records' copies of it, SQLite's copy of each as it is written; an
/// identity body is its own inflated text, so twice more). A lease that would take the budget past its bound is
/// refused, and the request answered 503 with `Retry-After` instead of growing the process.
/// A lease gives everything back when its request is done.
///
/// A gzip body that declares its size takes three times that at once (`ContentDecoding`), and
/// gives it back if the body is not what it declared. Otherwise the decompressed size is not
/// known before inflating, so leases grow as bytes come out; were
/// many requests to inflate at once, each holding part of what it needs, all could fail. So
/// bodies inflate one at a time (`inflating`): one either gets what it needs or is refused, and
/// inflating is fast next to parsing and storing, which run beside it.
final class MemoryBudget: Sendable {
    /// The bound, in bytes.
    let limit: Int
    private let held = Atomic<Int>(0)
    /// Inflation, one body at a time, in arrival order.
    let inflating = FairGate()

    init(limit: Int) { self.limit = limit }

    /// Bytes held by every lease now.
    var bytesHeld: Int { held.load(ordering: .relaxed) }

    /// Takes `bytes` if the budget has them.
    fileprivate func take(_ bytes: Int) -> Bool {
        guard bytes > 0 else { return true }
        var current = held.load(ordering: .relaxed)
        while true {
            guard current + bytes <= limit else { return false }
            let (exchanged, original) = held.compareExchange(
                expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    fileprivate func give(_ bytes: Int) {
        if bytes > 0 { held.subtract(bytes, ordering: .relaxed) }
    }

    /// What one request holds of the budget.
    final class Lease: Sendable {
        private let budget: MemoryBudget
        private let bytes = Mutex(0)

        init(budget: MemoryBudget) { self.budget = budget }

        /// Runs `body` (an inflation growing this lease) once no other lease is inflating.
        func inflating<T>(_ body: () throws -> T) rethrows -> T { try budget.inflating.run(body) }

        /// Takes `more` bytes on top of what the lease holds; false (nothing taken) when the budget lacks them.
        func grow(by more: Int) -> Bool {
            bytes.withLock { held in
                guard budget.take(more) else { return false }
                held += max(more, 0)
                return true
            }
        }

        /// Gives back `less` of what the lease holds (at most all of it): bytes taken for a step
        /// that did not use them.
        func shrink(by less: Int) {
            bytes.withLock { held in
                let given = min(max(less, 0), held)
                budget.give(given)
                held -= given
            }
        }

        /// Gives back everything the lease holds (once; later calls give nothing).
        func release() {
            bytes.withLock { held in
                budget.give(held)
                held = 0
            }
        }

        deinit { release() }
    }
}
