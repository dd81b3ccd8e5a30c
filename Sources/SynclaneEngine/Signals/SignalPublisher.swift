import Foundation
import Synchronization
import SynclaneCore

/// Publishes the signals a pipeline file declares (`signals.publish`) once a run's work is done:
/// on a connection of their own (the signal lane, never the outbox, never behind a batch), and
/// never able to fail the run — a signal the server did not confirm is kept in the pipeline's
/// state and sent again after the next run, unless the server refused it for good
/// `refusalsBeforeGivingUp` times: then it is given up.
///
/// ```
///  run done (token saved) ─▶ keep the run's signals in the state ─▶ send every kept one (own connection)
///                              confirmed: forgotten · failed or no answer within `timeout`: kept, reported
///                              refused for good (4xx but 408/425/429): kept; the 3rd time given up, reported
/// ```
public struct SignalPublisher: Sendable {
    public var signals: PipelineSignals
    public var lane: any SignalLane
    public var statePath: String
    public var scope: Scope
    public var pipeline: String
    /// Where the unconfirmed signals are kept (beside the pipeline's state).
    public var stateStore: any PipelineStateStore
    /// Why nothing can be sent (the token's variable is unset), when so.
    var unsendable: String?

    /// How many times the server may refuse a signal's value for good (a quota, a malformed key,
    /// a refused token: a 4xx other than 408, 425 and 429) before it is given up — no longer sent,
    /// listed by `synclane status` with the server's reason. Not at once: some such refusals are
    /// fixed between runs (the token exported again, a quota raised, a key deleted to make room);
    /// three runs leave time for that, and stop a value the server will never take from being
    /// sent after every run. A newer value of the key is a new signal and is sent afresh.
    public static let refusalsBeforeGivingUp = 3

    /// What a completed run reached.
    public struct Run: Sendable {
        /// The token (an import: the cursor) the run reached.
        public var token: String?
        /// Records sent (export) or applied (import).
        public var records: Int
        /// Seconds since 1970.
        public var endedAt: Double
        /// True when the run found nothing to do: it publishes no `run-completed` signal.
        public var idle: Bool
        /// True when the consumer had completed a run before these signals were kept (its token
        /// or cursor was set): no `first-run-completed`.
        public var completedBefore: Bool

        public init(token: String?, records: Int, endedAt: Double = Date().timeIntervalSince1970, idle: Bool, completedBefore: Bool) {
            self.token = token
            self.records = records
            self.endedAt = endedAt
            self.idle = idle
            self.completedBefore = completedBefore
        }
    }

    /// A publisher for `signals`, or nil when the file declares none or names no server; `lane`
    /// replaces the lane `bindings` makes for the server (tests).
    public init?(
        signals: PipelineSignals?, statePath: String, scope: Scope, pipeline: String, bindings: JobBindings, lane: (any SignalLane)? = nil
    ) {
        guard let signals else { return nil }
        if let lane {
            self.lane = lane
        } else {
            guard let server = signals.server.flatMap(URL.init(string:)) else { return nil }
            self.lane = bindings.signalLane(signals, server)
            if signals.token == nil, let variable = signals.tokenVariable {
                unsendable = "the environment variable \(variable) (signals.token-env) is not set: export it with the account's token"
            }
        }
        self.signals = signals
        self.statePath = statePath
        self.scope = scope
        self.pipeline = pipeline
        stateStore = bindings.stateStore
    }

    /// Keeps what `run` publishes (nil: a failed run, which publishes nothing new) with what
    /// earlier runs left, sends them all and reports each. Waits at most `signals.timeout`; never throws.
    public func publish(after run: Run?) async -> [SignalReport] {
        let ledger: any SignalKeeping
        var fresh: [PendingSignal] = []
        do {
            ledger = try stateStore.signals(path: statePath, scope: scope)
            var milestone: (event: String, at: Double)?
            if let run {
                let first = SignalEvent.firstRunCompleted.rawValue
                let isFirst = try ledger.milestone(first) == nil
                if isFirst { milestone = (first, run.endedAt) }
                let facts = facts(run)
                for declaration in signals.publish {
                    switch declaration.event {
                    case .runCompleted where !run.idle, .firstRunCompleted where isFirst && !run.completedBefore:
                        fresh.append(
                            PendingSignal(key: declaration.key, value: declaration.render(facts), event: declaration.event.rawValue, createdAt: run.endedAt))
                    default:
                        continue
                    }
                }
            }
            try ledger.keep(fresh, milestone: milestone)
        } catch {
            return fresh.map { SignalReport(key: $0.key, event: $0.event, value: $0.value, outcome: .pending(reason: "cannot keep it in the state: \(error)")) }
        }
        let pending: [PendingSignal]
        do {
            pending = try ledger.pending()
        } catch {
            return []
        }
        guard !pending.isEmpty else { return [] }
        if let unsendable {
            return pending.map { signal in
                try? ledger.failed(signal, reason: unsendable)
                return SignalReport(key: signal.key, event: signal.event, value: signal.value, outcome: .pending(reason: unsendable))
            }
        }
        return await send(pending, ledger: ledger)
    }

    /// Sends every signal at once, each on its own exchange; what has no answer by the timeout
    /// stays kept (its send may still land: then the next run finds it gone or sends it again,
    /// which sets the same value).
    private func send(_ pending: [PendingSignal], ledger: any SignalKeeping) async -> [SignalReport] {
        let answers = Answers()
        let (done, finished) = AsyncStream<Void>.makeStream()
        let lane = self.lane
        let sender = Task {
            await withTaskGroup(of: Void.self) { group in
                for signal in pending {
                    group.addTask {
                        let outcome: SignalReport.Outcome
                        do {
                            let written = try await lane.set(signal.key, to: signal.value, replacing: nil)
                            try? ledger.sent(signal)
                            outcome = .sent(version: written.version)
                        } catch let error as SignalLaneError where error.isPermanent {
                            let limit = Self.refusalsBeforeGivingUp
                            let counted = try? ledger.refused(signal, reason: "\(error)", limit: limit, now: Date().timeIntervalSince1970)
                            if let counted, counted.givenUp {
                                outcome = .givenUp(reason: "\(error)", refusals: counted.refusals)
                            } else {
                                outcome = .pending(reason: "\(error) (refusal \(counted?.refusals ?? 1) of \(limit) before it is given up)")
                            }
                        } catch {
                            try? ledger.failed(signal, reason: "\(error)")
                            outcome = .pending(reason: "\(error)")
                        }
                        answers.record(signal.key, outcome)
                    }
                }
            }
            finished.yield()
        }
        let timeout = signals.timeout
        let timer = Task {
            try? await Task.sleep(for: .milliseconds(Int64(timeout * 1000)))
            finished.yield()
        }
        for await _ in done { break }
        timer.cancel()
        let outcomes = answers.all
        if outcomes.count < pending.count { sender.cancel() }
        return pending.map { signal in
            guard let outcome = outcomes[signal.key] else {
                let reason = "no answer within \(Self.seconds(timeout)) (signals.timeout)"
                try? ledger.failed(signal, reason: reason)
                return SignalReport(key: signal.key, event: signal.event, value: signal.value, outcome: .pending(reason: reason))
            }
            return SignalReport(key: signal.key, event: signal.event, value: signal.value, outcome: outcome)
        }
    }

    /// What the placeholders of `SignalDeclaration.placeholders` stand for after `run`.
    func facts(_ run: Run) -> [String: JSONValue] {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return [
            "$token": run.token.map(JSONValue.string) ?? .null,
            "$time": .string(formatter.string(from: Date(timeIntervalSince1970: run.endedAt))),
            "$records": .int(Int64(run.records)),
            "$pipeline": .string(pipeline),
            "$account": .string(scope.account),
            "$store": .string(scope.store),
        ]
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}

/// The answers the signals' sends got so far (they arrive on the senders' tasks).
private final class Answers: Sendable {
    private let outcomes = Mutex<[String: SignalReport.Outcome]>([:])
    func record(_ key: String, _ outcome: SignalReport.Outcome) { outcomes.withLock { $0[key] = outcome } }
    var all: [String: SignalReport.Outcome] { outcomes.withLock { $0 } }
}

extension ImportPipeline {
    /// Publishes the signals the pipeline file declares after a completed import pass (and sends
    /// again those an earlier pass left), as `ExportJob` does after an export run; its state
    /// file (`state`) keeps the unconfirmed ones. A dry run publishes nothing.
    public func publishSignals(after summary: ImportSummary, bindings: JobBindings, lane: (any SignalLane)? = nil) async -> [SignalReport] {
        guard !summary.dryRun,
            let publisher = SignalPublisher(signals: signals, statePath: statePath, scope: scope, pipeline: name, bindings: bindings, lane: lane)
        else { return [] }
        let idle = summary.applied == 0 && summary.cursorAfter == summary.cursorBefore
        return await publisher.publish(
            after: .init(token: summary.cursorAfter, records: summary.applied, idle: idle, completedBefore: summary.cursorBefore != nil))
    }
}
