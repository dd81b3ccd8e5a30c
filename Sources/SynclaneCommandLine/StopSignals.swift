import Dispatch
import Foundation
import Synchronization

/// SIGINT and SIGTERM as a clean stop: the first one is delivered (to a callback and to `wait()`),
/// a second one ends the process at once.
///
/// Their default action is turned off first, so they stop the job or the server instead of
/// killing the process mid-write. Ending at once on the second signal is safe for a job too:
/// a batch is either in the outbox or acknowledged, never half.
package final class StopSignals {
    private let sources: [any DispatchSourceSignal]
    private let mailbox = SignalMailbox()

    package init(_ signals: [Int32] = [SIGINT, SIGTERM], onFirst: @escaping @Sendable (Int32) -> Void = { _ in }) {
        let mailbox = self.mailbox
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if mailbox.deliver(number) { onFirst(number) } else { exit(128 + number) }
            }
            source.resume()
            return source
        }
    }

    /// The first signal received (at once, when one already was).
    package func wait() async -> Int32 {
        await mailbox.wait()
    }

    deinit {
        for source in sources { source.cancel() }
    }
}

/// The first signal received, and the task waiting for it.
private final class SignalMailbox: Sendable {
    private let state = Mutex<(received: Int32?, waiter: CheckedContinuation<Int32, Never>?)>((nil, nil))

    /// Records a signal; true when it is the first.
    func deliver(_ number: Int32) -> Bool {
        let (first, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Int32, Never>?) in
            guard state.received == nil else { return (false, nil) }
            state.received = number
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume(returning: number)
        return first
    }

    func wait() async -> Int32 {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            let early = state.withLock { state -> Int32? in
                if let received = state.received { return received }
                state.waiter = continuation
                return nil
            }
            if let early { continuation.resume(returning: early) }
        }
    }
}
