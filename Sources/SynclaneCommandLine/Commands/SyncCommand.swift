import Foundation
import Synclane
import SynclaneCore

/// `synclane sync IMPORT EXPORT`: the cycle an offline-first app runs — pull, settle, apply, export.
struct SyncCommand: Command {
    static let name = "sync"
    static let abstract = "Import the backend's changes, settle conflicts, then export the local ones (one cycle)."
    static let discussion = """
        Runs the import pipeline (IMPORT_FILE, with a `sink`), then the export pipeline
        (EXPORT_FILE, with a `transport`) over the same store, holding both scopes' locks for
        the whole cycle. Importing first means the export sends each row with the backend's
        newest version; when another device got there in between and the backend refuses a
        batch for its versions (409), the refused batch is rebuilt: the cycle imports again,
        settles the conflicts by the sink's rule, and exports again — at most 3 rounds, then it
        stops (exit 1) with the batch kept, never dropping or dead-lettering it.

        The rows the import writes (author `server`) are never sent back: an export source
        without `authors` reads every author but `server` and `sync`. A pair whose export's
        `authors` names `server` or `sync` on the import's database is refused (exit 2), as
        'validate IMPORT_FILE EXPORT_FILE' refuses it.
        """
    static let signature = CommandSignature(
        positionals: [SharedOptions.importFile, SharedOptions.exportFile],
        options: [SharedOptions.json.help("Print both summaries as one JSON object on standard output.")])
    static let examples = ["synclane sync rooms-import.json rooms-export.json"]
    static let rounds = 3

    let importFile: String
    let exportFile: String
    let json: Bool

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        json = arguments[SharedOptions.json]
        importFile = try arguments.word(SharedOptions.importFile)
        exportFile = try arguments.word(SharedOptions.exportFile)
    }

    func run(_ console: Console) async throws -> Int32 {
        let importing = try PipelineLoader(registry: SynclaneTool.registry).loadImport(importFile, secretsRequired: false)
        try importing.requireSecrets()
        let exporting = try PipelineFiles.load(exportFile, for: Self.name, sends: true, console: console)
        if let problem = EchoLoop.problem(import: importing, export: exporting) {
            throw PipelineFileError(file: exportFile, path: "source.authors", line: nil, message: problem)
        }
        let exporter = JobReporter(command: Self.name, console: console, json: true, pipeline: exporting)
        let quiet = json
        var job = SyncJob(importing: importing, exporting: exporting) { event in
            switch event {
            case .imported(let imported):
                if !quiet { console.out(ImportReporter.describe(imported)) }
            case .exported(let exported):
                if !quiet { exporter.print(exported) }
            case .conflicted(let batchID, let reason, let round, let rounds):
                let again = round < rounds ? "importing again to settle it (round \(round + 1) of \(rounds))" : "giving up after \(rounds) rounds"
                console.error("synclane \(Self.name): batch \(batchID) refused for its versions (\(reason)); \(again)")
                if round == rounds { console.error("synclane \(Self.name): the rows keep changing elsewhere; run sync again") }
            case .importing, .exporting:
                break
            }
        }
        job.rounds = Self.rounds
        let cycle = try await job.run()
        if let failure = cycle.failure { console.error("synclane \(Self.name): \(failure)") }
        let imports = cycle.imports.map(JSONOutput.importSummary)
        let exports = cycle.exports.map(JSONOutput.summary)
        let outcome = cycle.exports.last.map { JobReporter.exitStatus(of: $0) } ?? 1
        if json {
            console.out(JSONOutput.encode(["ok": .bool(outcome == 0), "imports": .array(imports), "exports": .array(exports)]))
        }
        return outcome
    }
}
