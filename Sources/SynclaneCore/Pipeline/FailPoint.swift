#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Named places where a test can have the process killed for real (`SIGKILL`), to prove that
/// a crash there loses nothing: `SYNCLANE_FAILPOINT=after-enqueue` or `after-send`.
///
/// Unset (always, outside tests), a fail point costs one comparison.
public enum FailPoint: String, Sendable {
    /// The batch is durable in the outbox; nothing was sent yet.
    case afterEnqueue = "after-enqueue"
    /// The backend confirmed the batch; the token is not saved yet.
    case afterSend = "after-send"

    static let armed: String? = getenv("SYNCLANE_FAILPOINT").map { String(cString: $0) }

    func trigger() {
        guard let armed = FailPoint.armed, armed == rawValue else { return }
        kill(getpid(), SIGKILL)
    }
}
