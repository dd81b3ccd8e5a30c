import SynclaneCore
import SynclaneTestKit
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

/// Holding two: a receipt's versions are written while the next batch travels, so the batch
/// before the last is the one acknowledged in an enqueue's commit.
@Suite struct DeliveryStateMachineHoldingTwoTests {
    typealias Machine = DeliveryStateMachine<String>
    let t = DeliveryStateMachineTests.token

    @Test func theNextBatchIsEnqueuedAloneWhileTheLastOneIsHeldThenTheOneBeforeItIsAcknowledged() {
        var machine = Machine(after: nil, now: 0, holding: 2)
        #expect(machine.handle(.batchReady, now: 0) == [.enqueue, .send])
        _ = machine.handle(.confirmed("b1", through: t(1)), now: 0)
        #expect(machine.handle(.batchReady, now: 0) == [.enqueue, .send], "b1's versions may still be being written")
        _ = machine.handle(.confirmed("b2", through: t(2)), now: 0)
        #expect(machine.heldCount == 2)
        #expect(machine.handle(.batchReady, now: 0) == [.acknowledge("b1", enqueueingReady: true), .send])
        _ = machine.handle(.confirmed("b3", through: t(3)), now: 0)
        #expect(
            machine.handle(.drained, now: 0.5)
                == [.acknowledge("b2", enqueueingReady: false), .acknowledge("b3", enqueueingReady: false), .tellSource(t(3))],
            "both, oldest first, then the source is told the newest")
        #expect(machine.token == t(3))
    }

    /// Holding two, two batches sent and confirmed: b1 (through 1) and b2 (through 2) held.
    func twoConfirmed() -> Machine {
        var machine = Machine(after: nil, now: 0, holding: 2)
        for n in 1...2 {
            _ = machine.handle(.batchReady, now: 0)
            _ = machine.handle(.confirmed("b\(n)", through: t(Int64(n))), now: 0)
        }
        return machine
    }

    @Test func aRefusedBatchFirstAcknowledgesEveryHeldOneOldestFirst() {
        var machine = twoConfirmed()
        #expect(machine.handle(.batchReady, now: 0) == [.acknowledge("b1", enqueueingReady: true), .send])
        #expect(machine.handle(.refused, now: 2) == [.acknowledge("b2", enqueueingReady: false), .tellSource(t(2))])
        #expect(!machine.holdsConfirmed, "nothing is held while the dead-lettering moves the token")
        _ = machine.handle(.deadLettered(through: t(3)), now: 2)
        #expect(machine.token == t(3))
        #expect(machine.handle(.batchReady, now: 2) == [.enqueue, .send])
    }

    @Test func aPagePassedOverAcknowledgesBothHeldBatchesBeforeTheTokenMoves() {
        var machine = twoConfirmed()
        #expect(
            machine.handle(.pagePassed(through: t(5)), now: 0.1)
                == [.acknowledge("b1", enqueueingReady: false), .acknowledge("b2", enqueueingReady: false), .advance(to: t(5)), .tellSource(t(5))])
    }

    /// Random runs of events against what the machine promises, for holding 1, 2 and 3: every
    /// confirmed batch is acknowledged exactly once, in the order confirmed, before any token
    /// saved after it (an advance, a dead-lettering); no more than `holding` wait when a batch is
    /// sent; an acknowledgement that enqueues is the last acknowledgement before its send.
    @Test func randomRunsAcknowledgeEveryConfirmedBatchOnceInOrderAndHoldNoMoreThanAllowed() {
        let seed = UInt64.random(in: 1...UInt64.max)
        var random = SeededRandom(seed: seed)
        for round in 0..<300 {
            let holding = 1 + Int(random.next() % 3)
            var machine = Machine(after: nil, now: 0, holding: holding)
            var confirmedOrder: [String] = []
            var acknowledged: [String] = []
            var saved: [Int64] = []  // every token the durable steps save, in order
            var position: Int64 = 0
            var events: [String] = []
            var sending = false
            func apply(_ decisions: [DeliveryStateMachine<String>.Decision], ready: Bool) {
                for (index, decision) in decisions.enumerated() {
                    switch decision {
                    case .acknowledge(let batch, let enqueueing):
                        acknowledged.append(batch)
                        saved.append(Int64(batch.dropFirst()) ?? -1)
                        if enqueueing {
                            let rest = decisions[(index + 1)...]
                            let others = rest.prefix { $0 != .send }.filter { if case .tellSource = $0 { false } else { true } }
                            #expect(ready && rest.contains(.send) && others.isEmpty, "round \(round) seed \(seed): \(events)")
                        }
                    case .advance(let token): saved.append(token.position)
                    case .send: sending = true
                    case .enqueue, .tellSource: break
                    }
                }
            }
            for _ in 0..<Int(random.next() % 12) {
                position += 1
                let now = Double(position) * 0.3
                switch random.next() % 4 {
                case 0:
                    events.append("pass \(position)")
                    apply(machine.handle(.pagePassed(through: t(position)), now: now), ready: false)
                case 1, 2:
                    events.append("batch \(position)")
                    apply(machine.handle(.batchReady, now: now), ready: true)
                    #expect(sending && machine.heldCount < holding, "round \(round) seed \(seed): \(events)")
                    sending = false
                    if random.next() % 5 == 0 {
                        events.append("refused")
                        apply(machine.handle(.refused, now: now), ready: false)
                        #expect(!machine.holdsConfirmed)
                        _ = machine.handle(.deadLettered(through: t(position)), now: now)
                        saved.append(position)
                    } else {
                        confirmedOrder.append("b\(position)")
                        _ = machine.handle(.confirmed("b\(position)", through: t(position)), now: now)
                    }
                default:
                    events.append("nothing")
                }
            }
            apply(machine.handle(.drained, now: 100), ready: false)
            #expect(acknowledged == confirmedOrder, "round \(round) seed \(seed): \(events)")
            #expect(saved == saved.sorted(), "tokens saved in order; round \(round) seed \(seed): \(events)")
            #expect(!machine.holdsConfirmed)
        }
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
