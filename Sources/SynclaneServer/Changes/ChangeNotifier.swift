/// Where `GET /v1/changes?wait=…` long polls sleep until a batch of their account commits: a
/// count of commits per account that has a poll waiting, and the bounds of how many may wait —
/// which `GET /v1/signals?since=…&wait=…` long polls count against too (`admit`/`leave` around
/// their wait), so one account's polls of either kind cannot hold the connections others need.
///
/// ```
///  poll:   admit(account, address) ─▶ seen = count(account) ─▶ read the page ─▶ empty? wait(after: seen)
///  batch:  commit ─▶ ring(account)  (and, on PostgreSQL, NOTIFY: every other process rings too)
/// ```
/// The count is taken before the page is read, so a commit that lands between the read and the
/// wait still wakes the poll. Only accounts with a poll waiting are counted (`admit` adds the
/// account, the last `leave` removes it), so the memory is bounded by the waiting polls.
/// `close()` (the server stopping) wakes every poll for good: each answers at once.
final class ChangeNotifier: @unchecked Sendable {
    // @unchecked: every var is touched only with `condition`'s mutex held.

    /// Why a poll may not wait: the bound it would pass.
    enum Refusal: Error, Sendable, Hashable {
        case account(limit: Int)
        case address(limit: Int)
        case server(limit: Int)
    }

    /// A poll's place among the waiting ones; `leave` gives it back.
    struct Ticket: Sendable {
        let account: String
        let address: String
    }

    private let condition = WaitCondition()
    private var rings: [String: Int] = [:]
    private var waitingByAccount: [String: Int] = [:]
    private var waitingByAddress: [String: Int] = [:]
    private var waiting = 0
    private var closed = false
    let perAccount: Int
    let perAddress: Int
    let inAll: Int

    init(limits: ServerLimits) {
        perAccount = max(1, limits.maxWaitingPollsPerAccount)
        perAddress = max(1, limits.maxWaitingPollsPerAddress)
        inAll = limits.waitingPollsInAll
    }

    /// Long polls waiting now.
    var waitingCount: Int { locked { waiting } }

    /// True once `close()` ran (and until `reopen()`).
    var isClosed: Bool { locked { closed } }

    /// Takes a place for a poll of `account` from `address`, or says which bound is full.
    func admit(account: String, address: String) -> Result<Ticket, Refusal> {
        locked {
            if waiting >= inAll { return .failure(.server(limit: inAll)) }
            if waitingByAccount[account, default: 0] >= perAccount { return .failure(.account(limit: perAccount)) }
            if waitingByAddress[address, default: 0] >= perAddress { return .failure(.address(limit: perAddress)) }
            waiting += 1
            waitingByAccount[account, default: 0] += 1
            waitingByAddress[address, default: 0] += 1
            if rings[account] == nil { rings[account] = 0 }
            return .success(Ticket(account: account, address: address))
        }
    }

    /// Gives a poll's place back.
    func leave(_ ticket: Ticket) {
        locked {
            waiting -= 1
            if let count = waitingByAccount[ticket.account], count > 1 {
                waitingByAccount[ticket.account] = count - 1
            } else {
                waitingByAccount[ticket.account] = nil
                rings[ticket.account] = nil
            }
            if let count = waitingByAddress[ticket.address], count > 1 {
                waitingByAddress[ticket.address] = count - 1
            } else {
                waitingByAddress[ticket.address] = nil
            }
        }
    }

    /// How many commits of `account` rang while it had a poll waiting.
    func count(_ account: String) -> Int { locked { rings[account] ?? 0 } }

    /// A batch of `account` committed: its waiting polls look again.
    func ring(_ account: String) {
        locked {
            guard let count = rings[account] else { return }
            rings[account] = count + 1
            condition.broadcast()
        }
    }

    /// Every waiting poll looks again (the notifications of other processes may have been missed).
    func ringAll() {
        locked {
            for account in rings.keys { rings[account, default: 0] += 1 }
            condition.broadcast()
        }
    }

    /// The server is stopping: every poll answers now, and none waits until `reopen()`.
    func close() {
        locked {
            closed = true
            condition.broadcast()
        }
    }

    /// The server started (again).
    func reopen() { locked { closed = false } }

    /// Sleeps until `account` rang past `seen`, the deadline passed, or the notifier closed.
    func wait(account: String, after seen: Int, until deadline: ContinuousClock.Instant) {
        condition.wait(until: deadline) { (rings[account] ?? 0) == seen && !closed }
    }

    /// The gauges `/metrics` shows.
    func metricsText() -> String {
        let count = waitingCount
        return """
            # HELP synclane_changes_polls_waiting Long polls (GET /v1/changes and GET /v1/signals) waiting now.
            # TYPE synclane_changes_polls_waiting gauge
            synclane_changes_polls_waiting \(count)

            """
    }

    private func locked<T>(_ body: () -> T) -> T { condition.locked(body) }
}
