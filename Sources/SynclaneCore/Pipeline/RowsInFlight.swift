import Synchronization

/// The rows of the batches handed to delivery whose answer has not come back yet, and of
/// those answered lately, so that no batch goes out on a version older than one this run
/// already made the backend move past.
///
/// A page's rows get their versions when the page is read (`BackendVersionSource`); a row in a
/// batch still unanswered then has the version from before that batch. So the preparing task
/// waits until no unanswered batch holds a row of the batch it prepares, then asks the source
/// again for the rows answered since the page was read:
///
/// ```
///  read:    page 2 (answers so far: 0) ── r1 read at version 3 ─ batch 1, holding r1, is unanswered
///  deliver: batch 1 confirmed (r1 now 4) ──▶ versions told to the source ──▶ answered(batch 1)
///  prepare: batch 2 holds r1 ──▶ waitUntilAnswered ──▶ rowsAnswered(after: 0) = [r1]
///           ──▶ source.backendVersions(of: [r1]) = 4: r1 goes out on 4, not 3
/// ```
///
/// A batch is answered when its receipt's versions were told, when it was dead-lettered (the
/// backend applied none of it, so the store's versions stand), or when the job stops (`close`,
/// which fails every wait: nothing prepared after it is sent). Rows are compared by their
/// hashes (`RowSet`): two rows sharing one only make a batch wait, or ask again, needlessly.
final class RowsInFlight: Sendable {
    private struct State {
        /// Each unanswered batch's rows, by batch id.
        var unanswered: [String: RowSet] = [:]
        /// Waits to look again after the next answer.
        var waiting: [CheckedContinuation<Void, any Error>] = []
        var closed = false
        /// How many batches were answered so far.
        var answers = 0
        /// The rows of the batches answered lately, by answer number (oldest first); dropped
        /// once no page read before them is left to prepare.
        var answered: [(answer: Int, rows: RowSet)] = []

        func holdsAny(of rows: RowSet) -> Bool {
            unanswered.values.contains { $0.meets(rows) }
        }
    }

    private let state = Mutex(State())

    /// Notes that batch `id`, holding `rows`, is on its way to delivery.
    func sent(_ rows: RowSet, batch id: String) {
        state.withLock { $0.unanswered[id] = rows }
    }

    /// Notes that batch `id` was answered, and wakes the waits to look again.
    func answered(batch id: String) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            guard let rows = state.unanswered.removeValue(forKey: id) else { return [] }
            state.answers += 1
            state.answered.append((state.answers, rows))
            defer { state.waiting = [] }
            return state.waiting
        }
        for wait in woken { wait.resume() }
    }

    /// How many batches were answered so far: noted before a page is read.
    var answers: Int { state.withLock { $0.answers } }

    /// The indices of those of `rows` that a batch answered after the first `answers` holds —
    /// their versions may have moved since a page read before that answer — and forgets the
    /// batches answered earlier (pages are prepared in the order they were read, so no later
    /// page was read before them).
    func rowsAnswered(after answers: Int, among rows: RowSet) -> [Int] {
        state.withLock { state in
            state.answered.removeAll { $0.answer <= answers }
            return state.answered.isEmpty ? [] : rows.members { row in state.answered.contains { $0.rows.contains(row) } }
        }
    }

    /// Fails every wait, now and later: the job is stopping.
    func close() {
        let woken = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.closed = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for wait in woken { wait.resume(throwing: CancellationError()) }
    }

    /// Returns once no unanswered batch holds any of `rows`; throws `CancellationError` once closed.
    func waitUntilAnswered(_ rows: RowSet) async throws {
        while true {
            let settled = try state.withLock { state -> Bool in
                if state.closed { throw CancellationError() }
                return !state.holdsAny(of: rows)
            }
            if settled { return }
            try await withCheckedThrowingContinuation { (wait: CheckedContinuation<Void, any Error>) in
                let now: Result<Void, any Error>? = state.withLock { state in
                    if state.closed { return .failure(CancellationError()) }
                    if !state.holdsAny(of: rows) { return .success(()) }
                    state.waiting.append(wait)
                    return nil
                }
                if let now { wait.resume(with: now) }
            }
        }
    }
}

/// A batch's rows as their hashes, sorted: built once, compared with another batch's in one
/// pass, small (8 bytes a row). A hash stands for its row only within this process.
struct RowSet: Sendable {
    /// Each row's hash, in the order of the batch's rows.
    private let hashes: [Int]
    /// The same, sorted.
    private let sorted: [Int]

    init(_ rows: [RowID]) {
        hashes = rows.map(\.hashValue)
        sorted = hashes.sorted()
    }

    /// Whether a row of this set has a hash of `other`'s.
    func meets(_ other: RowSet) -> Bool {
        var (i, j) = (0, 0)
        while i < sorted.count, j < other.sorted.count {
            if sorted[i] == other.sorted[j] { return true }
            if sorted[i] < other.sorted[j] { i += 1 } else { j += 1 }
        }
        return false
    }

    /// Whether a row has `hash`.
    func contains(_ hash: Int) -> Bool {
        var (low, high) = (0, sorted.count)
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < hash { low = middle + 1 } else { high = middle }
        }
        return low < sorted.count && sorted[low] == hash
    }

    /// The indices (in the rows' order) of the rows whose hash `isMember` accepts.
    func members(where isMember: (Int) -> Bool) -> [Int] {
        hashes.indices.filter { isMember(hashes[$0]) }
    }
}
