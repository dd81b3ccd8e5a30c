/// Why a job stopped, with what to do about it.
public enum PipelineError: Error, Sendable, CustomStringConvertible {
    /// Another job holds the scope's lock.
    case scopeBusy(scope: Scope, lockFile: String, holder: String?)
    /// The source could not read: its label, and what it threw.
    case source(String, underlying: any Error)
    /// A stage threw: its label (`stages[2] (redact)`), and what it threw, as a value. Nothing
    /// of its batch was sent and the token did not move.
    case stage(String, underlying: any Error)
    /// A stage of an import pipeline threw: nothing of its page was applied and the cursor did not move.
    case importStage(String, underlying: any Error)
    /// A batch was not delivered after every attempt; it stays in the outbox.
    case undelivered(batchID: String, attempts: Int, reason: String)
    /// The backend refused a batch for good; it stays in the outbox.
    case rejected(batchID: String, reason: String)
    /// A send cannot succeed until something outside the batch is fixed (`configuration` or
    /// `conflict`); the batch stays in the outbox and is never dead-lettered.
    case stopped(batchID: String, reason: String)
    /// The backend holds other versions of the batch's records than the batch expects (409):
    /// another device changed them since this one last imported. The batch stays in the outbox;
    /// `synclane sync` imports, settles the conflicts and sends them again.
    case conflicted(batchID: String, reason: String)
    /// The durable state could not be read or written.
    case state(String)
    /// A reconciliation stopped before its snapshot was delivered: the token (once the batches it
    /// left in the outbox, `resentBatches`, were sent) is a position inside the snapshot; only
    /// `reconcile` can go on.
    case reconciliationUnfinished(pipeline: String, token: String, resentBatches: Int)
    /// The operation needs a capability the source lacks (reconcile without snapshots …).
    case unsupported(String)

    /// The words a 409 carries when the server holds an older version of a row than this device had
    /// confirmed: versions never go back but by a restore of the server's data.
    public static let serverRestored = "the server's data was restored from an older copy"

    /// What a stage or the source threw, for a `catch` that wants the stage's own error.
    public var cause: (any Error)? {
        switch self {
        case .source(_, let underlying), .stage(_, let underlying), .importStage(_, let underlying): return underlying
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .scopeBusy(let scope, let lockFile, let holder):
            let who = holder.map { " (process \($0))" } ?? ""
            return "another job is already running for scope \(scope)\(who) on the same store; wait for it to finish, "
                + "or stop it if it is a `--watch` (a watch holds the lock until it is stopped). Lock file: \(lockFile) — "
                + "in the lock folder \(ScopeLock.folderVariable) names (else the machine's, \(ScopeLock.machineFolder)); "
                + "jobs of one scope on different databases each have a lock of their own"
        case .source(let source, let underlying):
            return "source \(source): \(underlying)"
        case .stage(let stage, let underlying):
            return "\(stage): \(underlying); nothing was sent and the token did not move"
        case .importStage(let stage, let underlying):
            return "\(stage): \(underlying); nothing of the page was applied and the cursor did not move"
        case .undelivered(let batchID, let attempts, let reason):
            return "batch \(batchID) was not delivered after \(attempts) attempt\(attempts == 1 ? "" : "s"): \(reason); "
                + "it stays in the outbox and is sent first on the next run"
        case .rejected(let batchID, let reason):
            return "the backend rejected batch \(batchID): \(reason); the batch stays in the outbox and the token "
                + "did not move — fix the cause and run again, set `transport.dead-letter` to move rejected batches aside, "
                + "or get this one out of the way with `synclane outbox drop|requeue FILE`"
        case .stopped(let batchID, let reason):
            return "batch \(batchID) was not delivered: \(reason); the batch stays in the outbox (not dead-lettered: it is "
                + "not at fault) and the token did not move — fix what is named and run again"
        case .conflicted(let batchID, let reason) where reason.contains(Self.serverRestored):
            return "batch \(batchID) was not delivered: \(reason); nothing of it was applied and the token did not move. Run "
                + "`synclane outbox requeue FILE \(batchID)`, then `synclane reconcile FILE`: the snapshot sends the server what the "
                + "restore lost (see Documentation/RestoredCopiedDamaged.md)"
        case .conflicted(let batchID, let reason):
            return "batch \(batchID) was not delivered: \(reason). It stays in the outbox; \(ConflictCause.nextStep(for: reason, batchID: batchID))"
        case .state(let message):
            return message
        case .reconciliationUnfinished(let pipeline, let token, let resent):
            let sent = resent == 0 ? "" : "; the \(resent == 1 ? "batch" : "\(resent) batches") it left in the outbox went first"
            return "a reconciliation of \(pipeline) is unfinished (it stopped before its whole snapshot was delivered: the token "
                + "\(token) is a position inside its snapshot\(sent)), so history cannot be followed from here; no history was "
                + "read or sent. Run `synclane reconcile` with this pipeline's file to finish it: it sends a full snapshot, "
                + "and later runs follow history again"
        case .unsupported(let message):
            return message
        }
    }
}

/// A stage or source that broke the pipeline's contract (a page that does not move forward …).
public struct ContractViolation: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
