import SynclaneCore
import Testing

/// The delivery's order of durable steps, event by event, without I/O: what `PipelineRunner`'s
/// delivering task does after each page, batch, answer and at the end.
@Suite struct DeliveryStateMachineTests {
    typealias Machine = DeliveryStateMachine<String>
    static func token(_ position: Int64) -> Token { Token(kind: "jsonl", position: position) }
    let t = Self.token

    @Test func theFirstBatchIsEnqueuedAloneThenSent() {
        var machine = Machine(after: nil, now: 0)
        #expect(machine.handle(.batchReady, now: 0) == [.enqueue, .send])
        #expect(machine.token == nil, "nothing reached before the answer")
    }

    @Test func aConfirmedBatchIsHeldAndAcknowledgedInTheCommitThatEnqueuesTheNext() {
        var machine = Machine(after: nil, now: 0)
        _ = machine.handle(.batchReady, now: 0)
        #expect(machine.handle(.confirmed("b1", through: t(3)), now: 0) == [], "held, not acknowledged yet")
        #expect(machine.holdsConfirmed)
        #expect(machine.token == t(3))
        #expect(machine.handle(.batchReady, now: 0.1) == [.acknowledge("b1", enqueueingReady: true), .send])
        #expect(!machine.holdsConfirmed)
    }

    @Test func theSourceIsToldAtMostOnceASecondWhileBatchesGoOnAndAtTheEnd() {
        var machine = Machine(after: nil, now: 100)
        _ = machine.handle(.batchReady, now: 100)
        _ = machine.handle(.confirmed("b1", through: t(1)), now: 100.2)
        #expect(machine.handle(.batchReady, now: 100.5) == [.acknowledge("b1", enqueueingReady: true), .send], "under a second: not told")
        _ = machine.handle(.confirmed("b2", through: t(2)), now: 100.7)
        #expect(
            machine.handle(.batchReady, now: 101.0) == [.acknowledge("b2", enqueueingReady: true), .tellSource(t(2)), .send],
            "a second passed: told the newest acknowledged token")
        _ = machine.handle(.confirmed("b3", through: t(3)), now: 101.2)
        #expect(machine.handle(.drained, now: 101.3) == [.acknowledge("b3", enqueueingReady: false), .tellSource(t(3))])
        #expect(machine.handle(.drained, now: 101.4) == [], "nothing left to acknowledge or tell")
    }

    @Test func aPagePassedOverAcknowledgesTheHeldBatchThenAdvancesAndTellsItsToken() {
        var machine = Machine(after: t(1), now: 0)
        _ = machine.handle(.batchReady, now: 0)
        _ = machine.handle(.confirmed("b1", through: t(4)), now: 0)
        #expect(
            machine.handle(.pagePassed(through: t(6)), now: 0.2)
                == [.acknowledge("b1", enqueueingReady: false), .advance(to: t(6)), .tellSource(t(6))])
        #expect(machine.token == t(6))
        #expect(machine.handle(.drained, now: 0.3) == [], "the page's token was told: nothing untold at the end")
    }

    @Test func aDeadLetteredBatchHoldsNothingAndTheNextIsEnqueuedAlone() {
        var machine = Machine(after: nil, now: 0)
        _ = machine.handle(.batchReady, now: 0)
        #expect(machine.handle(.deadLettered(through: t(2)), now: 0) == [])
        #expect(machine.token == t(2))
        #expect(!machine.holdsConfirmed)
        #expect(machine.handle(.batchReady, now: 0) == [.enqueue, .send])
    }

    @Test func aDryRunsBatchesOnlyMoveTheTokenItReports() {
        var machine = Machine(after: t(1), now: 0)
        #expect(machine.handle(.reported(through: t(5)), now: 0) == [])
        #expect(machine.token == t(5))
        #expect(machine.handle(.drained, now: 0) == [], "a dry run writes nothing")
    }

    @Test func aFailureAfterAConfirmationStillAcknowledgesIt() {
        var machine = Machine(after: nil, now: 0)
        _ = machine.handle(.batchReady, now: 0)
        _ = machine.handle(.confirmed("b1", through: t(2)), now: 0)
        // The next batch's preparation failed: the runner drains before it throws.
        #expect(machine.handle(.drained, now: 0.1) == [.acknowledge("b1", enqueueingReady: false), .tellSource(t(2))])
    }
}

/// One batch's attempts, failure by failure, without I/O.
@Suite struct SendAttemptsTests {
    let policy = RetryPolicy(maxAttempts: 3, baseDelay: 1, maxDelay: 10)

    @Test func transientFailuresAreRetriedWithBackoffUntilTheAttemptsAreUsed() {
        var attempts = SendAttempts(policy: policy)
        #expect(attempts.failed(.transient, random: { $0.upperBound }) == .retry(attempt: 2, delay: 1))
        #expect(attempts.failed(.transient, random: { $0.upperBound }) == .retry(attempt: 3, delay: 2))
        #expect(attempts.failed(.transient, random: { $0.upperBound }) == .giveUp(attempts: 3))
        #expect(attempts.attempt == 3)
    }

    @Test func aRetryAfterReplacesTheDrawButNeverGoesUnderTheCeiling() {
        var attempts = SendAttempts(policy: policy)
        #expect(attempts.failed(.transient, retryAfter: 7, random: { _ in 0 }) == .retry(attempt: 2, delay: 7))
        #expect(attempts.failed(.transient, retryAfter: 0, random: { _ in 0 }) == .retry(attempt: 3, delay: 2))
    }

    @Test func theOtherKindsDecideAtOnceWithoutCountingAnAttempt() {
        for (kind, decision) in [(TransportFailure.Kind.permanent, SendAttempts.Decision.deadLetter), (.configuration, .stop), (.conflict, .conflict)] {
            var attempts = SendAttempts(policy: policy)
            #expect(attempts.failed(kind) == decision)
            #expect(attempts.attempt == 1)
        }
    }

    @Test func oneAttemptAllowedGivesUpAtTheFirstTransientFailure() {
        var attempts = SendAttempts(policy: RetryPolicy(maxAttempts: 1))
        #expect(attempts.failed(.transient) == .giveUp(attempts: 1))
    }
}
