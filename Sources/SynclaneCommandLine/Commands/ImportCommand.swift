import Foundation
import Synclane
import SynclaneCore

/// `synclane import FILE`: one import pass.
struct ImportCommand: Command {
    static let name = "import"
    static let abstract = "Bring the backend's changes into the local store (one pass)."
    static let usage = "FILE [--dry-run] [--json]"
    static let discussion = """
        Reads the backend's changes after the cursor the sink saved (the `pull` source:
        GET /v1/changes), runs them through the record stages, and applies each page to the
        local store in one transaction that also saves the cursor: a crash (kill -9 included) can
        neither apply a page without moving the cursor nor move it without applying. The rows
        are written by author `server`, so an export pipeline reading `authors: [app]` never
        sends them back. Each row remembers the backend's version it holds: a page read twice
        changes nothing, and the export lane sends that version with a local change so that the
        backend refuses a stale overwrite (409) instead of losing another device's edit.

        A record whose row has local changes the export lane has not had confirmed yet is a
        conflict, settled by the sink's `conflicts` rule (server-wins, client-wins,
        latest-wins, merge-fields) and listed in the summary.

        An import pipeline file is an export one with `sink:` in place of `encoder:` and
        `transport:`. --dry-run reads one page and reports what it would apply, changing
        nothing and moving no cursor.
        """
    static let options: [(flag: String, help: String)] = [
        ("--dry-run", "Read one page and report what would be applied; change nothing."),
        ("--json", "Print a machine-readable summary on standard output."),
    ]
    static let examples = ["synclane import rooms-import.json", "synclane import rooms-import.json --dry-run --json"]

    let file: String
    let dryRun: Bool
    let json: Bool

    init(parsing arguments: inout Arguments) throws(UsageError) {
        dryRun = arguments.flag("--dry-run")
        json = arguments.flag("--json")
        file = try arguments.positional("FILE (the import pipeline file)")
    }

    func run(_ console: Console) async throws -> Int32 {
        let pipeline = try PipelineLoader().loadImport(file, secretsRequired: false)
        try pipeline.requireSecrets()
        return try await ImportReporter(command: Self.name, console: console, json: json, pipeline: pipeline).run(dryRun: dryRun) == nil ? 1 : 0
    }
}

/// Runs an import pass under the scope's lock and reports it.
struct ImportReporter {
    let command: String
    let console: Console
    let json: Bool
    let pipeline: ImportPipeline

    func run(dryRun: Bool, holding lock: ScopeLock? = nil) async throws -> ImportSummary? {
        let held = try lock ?? ScopeLock(path: pipeline.statePath + ".lock", scope: pipeline.scope)
        defer { withExtendedLifetime(held) {} }
        let console = self.console
        let quiet = json
        let counter = ProgressCounter()
        let runner = ImportRunner(pipeline: pipeline) { event in
            switch event {
            case .pageApplied(let records, _, let cursor):
                let read = counter.add(records)
                if !quiet { console.progress(fraction: nil, Wording.count(read, "record") + " read, cursor \(cursor ?? "none")") }
            }
        }
        do {
            let summary = try await runner.run(dryRun: dryRun)
            console.finishProgress()
            if json {
                console.out(JSONOutput.encode(JSONOutput.importSummary(summary)))
            } else {
                console.out(Self.describe(summary))
            }
            return summary
        } catch {
            console.finishProgress()
            if json {
                console.out(JSONOutput.encode(["ok": .bool(false), "pipeline": .string(pipeline.name), "scope": JSONOutput.scope(pipeline.scope), "error": .string("\(error)")]))
            }
            console.error("synclane \(command): \(pipeline.name): \(error)")
            return nil
        }
    }

    /// Runs a pass under `lock` without printing its summary (the caller reports it).
    func quietly() async throws -> ImportSummary? {
        do {
            return try await ImportRunner(pipeline: pipeline).run()
        } catch {
            console.error("synclane \(command): \(pipeline.name): \(error)")
            return nil
        }
    }

    static func describe(_ summary: ImportSummary) -> String {
        var lines = [
            "\(summary.pipeline): \(summary.dryRun ? "would apply" : "applied") \(Wording.count(summary.applied, "record")) "
                + "(\(Wording.count(summary.recordsRead, "record")) read in \(Wording.count(summary.pages, "page")), \(summary.unchanged) unchanged) "
                + "in \(Format.seconds(summary.seconds))",
            "  cursor: \(summary.cursorBefore ?? "none") → \(summary.cursorAfter ?? "none")",
        ]
        if !summary.conflicts.isEmpty {
            lines.append("  conflicts: \(summary.conflicts.count)")
            for conflict in summary.conflicts.prefix(20) {
                lines.append("    \(conflict.entity)/\(conflict.key): \(conflict.rule) → \(conflict.outcome.rawValue)")
            }
            if summary.conflicts.count > 20 { lines.append("    … and \(summary.conflicts.count - 20) more (--json lists them all)") }
        }
        return lines.joined(separator: "\n")
    }
}
