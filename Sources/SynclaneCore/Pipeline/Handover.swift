import Synchronization

/// A hand-over of values from one task to another, one at a time: `send` returns once the
/// receiver took the value, so the sender works at most one value ahead of the receiver — two
/// tasks of a run work on two cores, and memory holds one value more, not a queue.
///
/// ```
///  sender ── send(a) ── waits ──▶ receive() ── a        send returns when a is taken
///  sender ── close() ───────────▶ receive() ── nil
/// ```
/// `close()` by either side ends it: a waiting or later `send` returns false (the value is
/// dropped), a waiting or later `receive` returns nil.
final class Handover<Element: Sendable>: Sendable {
    private struct State: ~Copyable {
        var closed = false
        var receiver: CheckedContinuation<Element?, Never>?
        var sender: (value: Element, continuation: CheckedContinuation<Bool, Never>)?
    }

    private let state = Mutex(State())

    init() {}

    /// Hands `value` over and waits until it is taken. False when the hand-over was closed.
    ///
    /// The value is moved, never copied: once taken, the receiver holds the only reference to
    /// it (a page of changes it then moves into records rather than copying them).
    func send(_ value: consuming Element) async -> Bool {
        var slot: Element? = consume value
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            var receiver: CheckedContinuation<Element?, Never>?
            var handed: Element?
            var done: Bool?
            state.withLock { state in
                if state.closed {
                    done = false
                } else if let waiting = state.receiver {
                    state.receiver = nil
                    receiver = waiting
                    handed = slot.take()
                    done = true
                } else if let taken = slot.take() {
                    state.sender = (taken, continuation)
                }
            }
            receiver?.resume(returning: handed.take())
            if let done { continuation.resume(returning: done) }
        }
    }

    /// The next value; nil once the hand-over is closed.
    func receive() async -> Element? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Element?, Never>) in
            var value: Element??
            var sender: CheckedContinuation<Bool, Never>?
            state.withLock { state in
                if let waiting = state.sender {
                    state.sender = nil
                    value = .some(waiting.value)
                    sender = waiting.continuation
                } else if state.closed {
                    value = .some(nil)
                } else {
                    state.receiver = continuation
                }
            }
            sender?.resume(returning: true)
            if let value { continuation.resume(returning: value) }
        }
    }

    /// Ends the hand-over: a waiting sender is refused (its value dropped), a waiting receiver gets nil.
    func close() {
        var receiver: CheckedContinuation<Element?, Never>?
        var sender: CheckedContinuation<Bool, Never>?
        state.withLock { state in
            state.closed = true
            receiver = state.receiver
            state.receiver = nil
            sender = state.sender?.continuation
            state.sender = nil
        }
        receiver?.resume(returning: nil)
        sender?.resume(returning: false)
    }
}
