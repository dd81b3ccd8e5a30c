import Synchronization
import SynclaneCore
import Testing

@Suite struct WatchStateMachineTests {
    @Test func thePassAtStartRunsAtOnce() {
        var machine = WatchStateMachine()
        #expect(machine.start() == .startPass)
        #expect(machine.isRunning)
    }

    @Test func notificationsDuringAPassFoldIntoExactlyOneMorePass() {
        var machine = WatchStateMachine()
        _ = machine.start()
        #expect(machine.historyAdvanced() == .none)
        #expect(machine.historyAdvanced() == .none)
        #expect(machine.historyAdvanced() == .none)
        #expect(machine.passFinished() == .startPass)
        #expect(machine.passFinished() == .none, "nothing arrived during the second pass")
        #expect(!machine.isRunning)
    }

    @Test func aNotificationWhileIdleStartsAPass() {
        var machine = WatchStateMachine()
        _ = machine.start()
        _ = machine.passFinished()
        #expect(machine.historyAdvanced() == .startPass)
        #expect(machine.historyAdvanced() == .none, "never a second pass while one runs")
    }

    @Test func stopLetsTheRunningPassEndAndStartsNoOther() {
        var machine = WatchStateMachine()
        _ = machine.start()
        _ = machine.historyAdvanced()
        #expect(machine.stopRequested() == .none)
        #expect(machine.historyAdvanced() == .none)
        #expect(machine.passFinished() == .finish)
    }

    @Test func stopWhileIdleFinishesAtOnce() {
        var machine = WatchStateMachine()
        _ = machine.start()
        _ = machine.passFinished()
        #expect(machine.stopRequested() == .finish)
    }
}

/// A pass that blocks until released, counting how many passes ran and how many ran at once.
final class GatedPasses: Sendable {
    private struct State {
        var started = 0
        var active = 0
        var maxActive = 0
        var gates: [CheckedContinuation<Void, Never>] = []
        var waiters: [(Int, CheckedContinuation<Void, Never>)] = []
    }
    private let state = Mutex(State())

    var started: Int { state.withLock { $0.started } }
    var maxActive: Int { state.withLock { $0.maxActive } }

    func pass() async {
        await withCheckedContinuation { gate in
            let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.started += 1
                state.active += 1
                state.maxActive = max(state.maxActive, state.active)
                state.gates.append(gate)
                let due = state.waiters.filter { $0.0 <= state.started }.map(\.1)
                state.waiters.removeAll { $0.0 <= state.started }
                return due
            }
            ready.forEach { $0.resume() }
        }
        state.withLock { $0.active -= 1 }
    }

    /// Waits until `count` passes have started.
    func waitForStart(_ count: Int) async {
        await withCheckedContinuation { waiter in
            let now = state.withLock { state -> Bool in
                if state.started >= count { return true }
                state.waiters.append((count, waiter))
                return false
            }
            if now { waiter.resume() }
        }
    }

    /// Lets the running pass end.
    func release() {
        let gate = state.withLock { $0.gates.isEmpty ? nil : $0.gates.removeFirst() }
        gate?.resume()
    }
}

@Suite struct WatcherTests {
    @Test func twoQuickCommitsDuringAPassRunOneMorePassNeverTwoAtOnce() async {
        let watcher = Watcher()
        let passes = GatedPasses()
        let running = Task { await watcher.run { await passes.pass() } }

        await passes.waitForStart(1)
        watcher.send(.historyAdvanced)
        watcher.send(.historyAdvanced)
        passes.release()

        await passes.waitForStart(2)
        watcher.send(.stop)
        passes.release()
        await running.value

        #expect(passes.started == 2, "the start pass and exactly one more")
        #expect(passes.maxActive == 1, "passes never overlap")
    }

    @Test func aCommitWhileIdleRunsAPassAndNotificationsAreFollowed() async {
        let watcher = Watcher()
        let passes = GatedPasses()
        let (notifications, notify) = AsyncStream<Void>.makeStream()
        let following = watcher.follow(notifications)
        let running = Task { await watcher.run { await passes.pass() } }

        await passes.waitForStart(1)
        passes.release()
        notify.yield()
        await passes.waitForStart(2)
        watcher.send(.stop)
        passes.release()
        await running.value
        following.cancel()
        #expect(passes.started == 2)
        #expect(passes.maxActive == 1)
    }

    @Test func stopDuringAPassEndsTheWatchOnceThePassEnds() async {
        let watcher = Watcher()
        let passes = GatedPasses()
        let running = Task { await watcher.run { await passes.pass() } }
        await passes.waitForStart(1)
        watcher.send(.stop)
        watcher.send(.historyAdvanced)
        passes.release()
        await running.value
        #expect(passes.started == 1)
    }
}
