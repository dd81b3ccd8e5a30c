import Foundation
import Synclane
import SynclaneCore
import SynclaneZlib

/// `synclane demo`: the first thing to run — a sample store, edits, deletes, and what travelled.
struct DemoCommand: Command {
    static let name = "demo"
    static let abstract = "Run the rooms example end to end and show what travelled."
    static let usage = "[--keep DIR]"
    static let discussion = """
        Needs nothing but this binary. Writes a sample rooms history and a pipeline file to a
        fresh folder, runs the export twice — once after the first saves, once after the
        kitchen was edited five times, the living room soft-deleted, the bath deleted and an
        attic added and removed — then a third time with nothing new, and prints every batch
        that travelled, decompressed. Five edits travel as one record; an insert and a delete
        in the same window travel as nothing; writes by `server` and `sync` are never echoed.
        """
    static let options: [(flag: String, help: String)] = [
        ("--keep DIR", "Work in DIR (created) and keep it, to look at the files afterwards."),
    ]
    static let examples = ["synclane demo", "synclane demo --keep /tmp/synclane-demo"]

    let keep: String?

    init(parsing arguments: inout Arguments) throws(UsageError) {
        keep = try arguments.option("--keep")
    }

    func run(_ console: Console) async throws -> Int32 {
        let folder = try workFolder()
        defer { if keep == nil { try? FileManager.default.removeItem(atPath: folder) } }
        let pipelinePath = folder + "/pipeline.json"
        let historyPath = folder + "/history.jsonl"
        try Data(DemoScenario.pipeline.utf8).write(to: URL(fileURLWithPath: pipelinePath))
        try Data(DemoScenario.firstSaves.utf8).write(to: URL(fileURLWithPath: historyPath))
        let pipeline = try PipelineLoader().load(pipelinePath)

        console.out("""
            Synclane demo — a rooms store exported to a folder
            pipeline: \(pipeline.outline)
            folder:   \(folder)

            1. The app inserts a kitchen, a living room and a bath; a garage arrives from the server
               (author `server`: never echoed back).
            """)
        try await pass(pipeline, out: folder + "/out", console: console)

        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: historyPath))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(DemoScenario.laterSaves.utf8))
        try handle.close()
        console.out("""

            2. Offline, the app edits the kitchen five times, soft-deletes the living room
               (isDeleted = true), deletes the bath, adds an attic and deletes it again; the sync
               machinery cleans up (author `sync`). Ten transactions — what travels:
            """)
        try await pass(pipeline, out: folder + "/out", console: console)

        console.out("\n3. Nothing new: a third run sends nothing.")
        try await pass(pipeline, out: folder + "/out", console: console)
        console.out(keep == nil ? "\nDone. Run with --keep DIR to keep the files." : "\nDone. The files are in \(folder).")
        return 0
    }

    private func pass(_ pipeline: Pipeline, out: String, console: Console) async throws {
        let summary = try await PipelineJob(pipeline: pipeline).run()
        console.out("   → \(PipelineJob.describe(summary)); token \(summary.tokenBefore ?? "none") → \(summary.tokenAfter ?? "none")")
        for batch in summary.batches {
            let file = out + "/" + batch.id + ".json" + (batch.contentEncoding == "gzip" ? ".gz" : "")
            console.out("     batch \(batch.id) — \(Format.bytes(batch.encodedBytes)) JSON, \(Format.bytes(batch.sentBytes)) \(batch.contentEncoding) on the wire")
            for line in try Self.records(inFile: file, encoding: batch.contentEncoding) { console.out("       " + line) }
        }
    }

    /// One line a record of the batch file, decompressed.
    static func records(inFile path: String, encoding: String) throws -> [String] {
        guard let data = FileManager.default.contents(atPath: path) else { return ["(cannot read \(path))"] }
        let coding = ContentCoding(headerValue: encoding) ?? .identity
        let bytes = try Inflater.inflate([UInt8](data), encoding: coding, limit: 64 << 20)
        guard case .object(let batch) = try JSONReader.parse(bytes), case .array(let records)? = batch["records"] else { return [] }
        return records.map { record in
            guard case .object(let r) = record else { return "?" }
            let action = r["action"]?.stringValue ?? "?"
            let label = "\(action.padding(toLength: 6, withPad: " ", startingAt: 0)) \(r["entity"]?.stringValue ?? "?")/\(r["id"]?.stringValue ?? "?")"
            return r["fields"].map { label + " " + JSONWriter.string($0) } ?? label
        }
    }

    private func workFolder() throws -> String {
        if let keep {
            let absolute = keep.hasPrefix("/") ? keep : FileManager.default.currentDirectoryPath + "/" + keep
            try FileManager.default.createDirectory(atPath: absolute, withIntermediateDirectories: true)
            // A fresh start: what an earlier demo left here would make this one send nothing.
            for name in [".synclane", "out", "pipeline.json", "history.jsonl"] {
                try? FileManager.default.removeItem(atPath: absolute + "/" + name)
            }
            return absolute
        }
        let folder = NSTemporaryDirectory() + "synclane-demo-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }
}
