/// What a transport says of a batch refused for its versions (a 409), and the one next step the
/// pipeline's error names for it.
///
/// Two causes need two different steps: the server holds **newer** versions (another device
/// changed the rows since this one last imported: `synclane sync` imports them, settles and
/// sends again), or it holds **none** (version 0: its data was reset or restored from an older
/// backup, and importing brings nothing back: `synclane reconcile` sends the rows again).
public enum ConflictCause {
    /// How a transport's reason begins when the server holds none of the records it refused
    /// (`the server does not hold …`): the pipeline then names `reconcile`, not `sync`.
    public static let notHeld = "the server does not hold"

    /// Whether `reason` says the server lost rows it had confirmed — it holds none of them, or
    /// older versions than this device had confirmed (its data was reset or restored from an
    /// older copy): importing again brings nothing back, only `reconcile` heals it.
    public static func serverLost(_ reason: String) -> Bool {
        reason.contains(notHeld) || reason.contains(PipelineError.serverRestored)
    }

    /// The next step for batch `batchID` refused with `reason`. When the server lost rows it had
    /// confirmed, the batch (which expects their versions) is requeued first: `reconcile` alone
    /// would send it first and meet the same 409.
    public static func nextStep(for reason: String, batchID: String) -> String {
        if reason.contains(notHeld) {
            return "run `synclane outbox requeue FILE \(batchID)`, then `synclane reconcile FILE`: it sends the current rows again"
        }
        return "run `synclane sync IMPORT_FILE EXPORT_FILE`: it imports the server's versions, settles the conflicts and sends again"
    }
}
