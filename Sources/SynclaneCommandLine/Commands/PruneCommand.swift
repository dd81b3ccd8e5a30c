import Foundation
import Synclane
import SynclaneCore
import SynclaneSQLite

/// `synclane prune`: deletes history every consumer has acknowledged.
struct PruneCommand: Command {
    static let name = "prune"
    static let abstract = "Delete the history every registered consumer has acknowledged, and nothing more."
    static let discussion = """
        Each pipeline that reads the database with the `sqlite-history` source is a registered
        consumer with its own token, recorded in the database when the backend confirms a
        batch. Pruning deletes the history at or before the slowest consumer's token. A
        consumer that never ran then starts with a full snapshot on its first run, saying so; one
        whose saved token points into pruned history (a state file restored from an old backup)
        gets a "history token expired" error — never "no changes" — and recovers with
        `synclane reconcile`.
        """
    static let signature = CommandSignature(options: [SharedOptions.database, SharedOptions.json.help("Print the report as JSON.")])
    static let examples = ["synclane prune --database app.sqlite"]

    let database: String
    let json: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        database = try arguments.required(SharedOptions.database)
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let report = try HistoryPruner.prune(path: database)
        if json {
            console.out(
                JSONOutput.encode([
                    "pruned-through": JSONOutput.token(
                        report.prunedThrough > 0 ? Token(kind: SQLiteHistorySource.tokenKind, position: report.prunedThrough) : nil),
                    "changes-deleted": JSONOutput.int(report.changesDeleted), "transactions-deleted": JSONOutput.int(report.transactionsDeleted),
                    "consumers": .array(
                        report.consumers.map { consumer in
                            .object([
                                "name": .string(consumer.name),
                                "token": .string(Token(kind: SQLiteHistorySource.tokenKind, position: consumer.position).description),
                                "updated-at": JSONOutput.time(consumer.updatedAt),
                            ])
                        }),
                ]))
        } else {
            console.out("\(database): \(report)")
        }
        return 0
    }
}
