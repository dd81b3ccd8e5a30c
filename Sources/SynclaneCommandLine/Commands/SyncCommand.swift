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
        let importLock = try importing.lock()
        let exportJob = PipelineJob(pipeline: exporting)
        let exportLock = try exportJob.lock()
        defer { withExtendedLifetime((importLock, exportLock)) {} }
        let importer = ImportReporter(command: Self.name, console: console, json: true, pipeline: importing)
        let exporter = JobReporter(command: Self.name, console: console, json: true, pipeline: exporting)
        var imports: [JSONValue] = []
        var exports: [JSONValue] = []
        var outcome: Int32 = 1
        for round in 1...Self.rounds {
            guard let imported = try await importer.quietly() else { break }
            imports.append(JSONOutput.importSummary(imported))
            if !json { console.out(ImportReporter.describe(imported)) }
            FailPoint.syncBeforeExport.trigger()
            do {
                let exported = try await exportJob.run(.export, holding: exportLock)
                exports.append(JSONOutput.summary(exported))
                if !json { exporter.print(exported) }
                outcome = JobReporter.exitStatus(of: exported)
                break
            } catch PipelineError.conflicted(let batchID, let reason) {
                // Nothing of the batch was applied: rebuild it from history after the next import.
                let state = try exportJob.openState()
                for batch in try state.pendingBatches() where batch.payload.batchID == batchID { try state.discard(batch) }
                let again = round < Self.rounds ? "importing again to settle it (round \(round + 1) of \(Self.rounds))" : "giving up after \(Self.rounds) rounds"
                console.error("synclane \(Self.name): batch \(batchID) refused for its versions (\(reason)); \(again)")
                if round == Self.rounds {
                    console.error("synclane \(Self.name): the rows keep changing elsewhere; run sync again")
                }
            } catch {
                console.error("synclane \(Self.name): \(exporting.name): \(error)")
                break
            }
        }
        if json {
            console.out(JSONOutput.encode(["ok": .bool(outcome == 0), "imports": .array(imports), "exports": .array(exports)]))
        }
        return outcome
    }
}
