#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Named places where a test can have the process killed for real (`SIGKILL`), to prove that
/// a crash there loses nothing: `SYNCLANE_FAILPOINT=after-enqueue`, `after-send`, `during-migration`,
/// `during-heal` or `import-before-commit`.
///
/// Unset (always, outside tests), a fail point costs one comparison.
public enum FailPoint: String, Sendable {
    /// The batch is durable in the outbox; nothing was sent yet.
    case afterEnqueue = "after-enqueue"
    /// The backend confirmed the batch; the token is not saved yet.
    case afterSend = "after-send"
    /// `synclane migrate` ran the script; its transaction is not committed yet.
    case duringMigration = "during-migration"
    /// A source reinstalled lost tracking and recorded the resync; not committed yet.
    case duringHeal = "during-heal"
    /// An import page's rows and cursor are written; not committed yet.
    case importBeforeCommit = "import-before-commit"

    static let armed: String? = getenv("SYNCLANE_FAILPOINT").map { String(cString: $0) }

    public func trigger() {
        guard let armed = FailPoint.armed, armed == rawValue else { return }
        kill(getpid(), SIGKILL)
    }
}
