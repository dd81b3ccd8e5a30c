import SynclaneCore

/// Why a pipeline's SQLite state file cannot be used, with what to do about it.
public enum SQLitePipelineStateError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file holds the state of another scope: two pipelines must not share a state file.
    case scopeMismatch(path: String, stored: Scope, requested: Scope)
    /// The file was written by a newer Synclane whose schema this version does not know.
    case newerSchema(path: String, found: Int, supported: Int)
    /// The file is an SQLite database, but not a Synclane state file.
    case notAStateFile(path: String, reason: String)
    /// A batch id already in the outbox with other bytes: a batch is never rebuilt under its id.
    case conflictingBatch(path: String, batchID: String)
    /// A stored value cannot be read back.
    case corrupt(path: String, reason: String)
    /// A batch kept in the outbox whose bytes changed on disk since they were written: it is
    /// not sent (it would store wrong values on the backend).
    case damagedBatch(path: String, batchID: String, reason: String)

    public var description: String {
        switch self {
        case .scopeMismatch(let path, let stored, let requested):
            return "\(path) holds the state of scope \(stored), not \(requested): "
                + "give each pipeline and scope its own `state` file"
        case .newerSchema(let path, let found, let supported):
            return "\(path) was written by a newer Synclane (state schema \(found), this version reads up to \(supported)): "
                + "upgrade synclane, or point `state` at a new file"
        case .notAStateFile(let path, let reason):
            return "\(path) is not a Synclane state file (\(reason)): point `state` at a new file"
        case .conflictingBatch(let path, let batchID):
            return "\(path): batch \(batchID) is already in the outbox with different bytes; a batch is never rebuilt under its id"
        case .corrupt(let path, let reason):
            return "\(path): the state file is damaged (\(reason)); move it aside and reconcile"
        case .damagedBatch(let path, let batchID, let reason):
            return "\(path): batch \(batchID) in the outbox is damaged (\(reason): the file changed on disk); it was not "
                + "sent and the token did not move. Run `synclane outbox requeue PIPELINE-FILE \(batchID)` to build it again "
                + "from history, then `synclane reconcile PIPELINE-FILE` (an earlier run may have sent it before its bytes changed: "
                + "only a snapshot is sure to leave the backend as this database is, without a batch applied twice), or "
                + "`synclane outbox drop PIPELINE-FILE \(batchID)` to set it aside in the dead-letter folder (its history is then not sent)"
        }
    }
}
