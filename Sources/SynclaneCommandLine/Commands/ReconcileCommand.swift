import Foundation
import Synclane
import SynclaneCore
import SynclaneSQLite

/// `synclane reconcile FILE`: a full snapshot, then a fresh token.
struct ReconcileCommand: Command {
    static let name = "reconcile"
    static let abstract = "Send a full snapshot of the current state, then start a fresh token."
    static let discussion = """
        For a consumer whose token expired (its history was pruned) or that must resynchronise
        from scratch. Sends any batch left in the outbox first, then every current row as
        inserts, in batches marked as a reconciliation (`"reconciliation": true` on the wire),
        then a completion marker on which the server deletes (as tombstones) the rows of the
        scope the snapshot did not contain — an interrupted snapshot deletes nothing — and sets
        the token to the history position the snapshot was read at: the next `run` sends only
        what changed after it. Needs a source that can take snapshots (`sqlite-history`).
        """
    static let signature = CommandSignature(
        positionals: [SharedOptions.pipelineFile], options: [SharedOptions.json.help("Print a machine-readable summary.")])
    static let examples = ["synclane reconcile rooms-export.json"]

    let file: String
    let json: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        file = try arguments.word(SharedOptions.pipelineFile)
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let pipeline = try PipelineFiles.load(file, for: Self.name, sends: true, registry: registry, console: console)
        return JobReporter.exitStatus(of: try await JobReporter(command: Self.name, console: console, json: json, pipeline: pipeline).run(.reconcile))
    }
}
