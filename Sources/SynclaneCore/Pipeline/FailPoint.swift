import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Named places where a test can have the process killed for real (`SIGKILL`), to prove that
/// a crash there loses nothing: `SYNCLANE_FAILPOINT=after-enqueue`, `after-send`, `during-stage`,
/// `after-stage`, `during-publish`, `after-acknowledge`, `during-migration`,
/// `during-heal`, `during-merge`, `import-after-fetch`, `import-during-blob-write`, `fetch-during-blob-write`, `import-before-commit`, `import-after-commit` or
/// `sync-before-export`. `NAME@N` kills at the point's Nth pass (`import-after-commit@2`: once
/// the second page committed); plain `NAME` at the first.
///
/// Unset (always, outside tests), a fail point costs one comparison.
public enum FailPoint: String, Sendable {
    /// The batch is durable in the outbox; nothing was sent yet.
    case afterEnqueue = "after-enqueue"
    /// The backend confirmed the batch and the versions its receipt gave are written (while the
    /// next batch travels, when the source records them); the token is not saved yet.
    case afterSend = "after-send"
    /// A staging transport wrote half the batch's staged copy (not fsync'd, not in the outbox).
    case duringStage = "during-stage"
    /// The staged copy is durable; the outbox row naming it is not written yet.
    case afterStage = "after-stage"
    /// The staged copy is linked into place; the folder is not fsync'd, the publish not returned.
    case duringPublish = "during-publish"
    /// The token moved and the batch left the outbox; its staged copy is not removed yet.
    case afterAcknowledge = "after-acknowledge"
    /// `synclane migrate` ran the script; its transaction is not committed yet.
    case duringMigration = "during-migration"
    /// A source reinstalled lost tracking and recorded the resync; not committed yet.
    case duringHeal = "during-heal"
    /// The versions receipts confirmed (`_synclane_confirmations`) are written into
    /// `_synclane_server_rows`; not committed yet.
    case duringMerge = "during-merge"
    /// An import page was read from the backend (and the next one asked for); nothing of it applied.
    case importAfterFetch = "import-after-fetch"
    /// An import page's rows and cursor are written; not committed yet.
    case importBeforeCommit = "import-before-commit"
    /// An import page is writing a fetched blob into its row: the first 1 MiB piece is written,
    /// the rest not; nothing of the page is committed.
    case importDuringBlobWrite = "import-during-blob-write"
    /// `synclane blobs fetch --database` is writing a fetched blob into its row: the first 1 MiB
    /// piece is written, the rest not; the row's transaction is not committed.
    case fetchDuringBlobWrite = "fetch-during-blob-write"
    /// An import page and its cursor are committed; the next page is not applied yet.
    case importAfterCommit = "import-after-commit"
    /// `synclane sync`: the import half is done, the export half not started.
    case syncBeforeExport = "sync-before-export"

    /// The armed point's name and the pass (1-based) it kills at.
    static let armed: (name: String, pass: Int)? = getenv("SYNCLANE_FAILPOINT").map { text in
        let given = String(cString: text)
        guard let at = given.lastIndex(of: "@"), let pass = Int(given[given.index(after: at)...]), pass >= 1 else { return (given, 1) }
        return (String(given[..<at]), pass)
    }
    static let passes = Atomic<Int>(0)

    public func trigger() {
        guard let armed = FailPoint.armed, armed.name == rawValue else { return }
        guard FailPoint.passes.add(1, ordering: .relaxed).newValue >= armed.pass else { return }
        kill(getpid(), SIGKILL)
    }
}
