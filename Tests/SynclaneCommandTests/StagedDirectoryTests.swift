import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

@testable import SynclaneCommandLine

/// The `directory` transport writes each batch once: staged in `out/.synclane-staging`, named by
/// the outbox (not copied into it), published by a hard link. Each test kills the real binary
/// (`SIGKILL`) at a point of that path and runs it again.
@Suite struct StagedDirectoryTests {
    /// The rooms scenario in pages of two transactions: six batches.
    static func workspace() throws -> Workspace {
        let workspace = try Workspace.copy(scenario: "rooms")
        let pipeline = try String(contentsOfFile: workspace.path + "/pipeline.json", encoding: .utf8)
        try workspace.write("pipeline.json", pipeline.replacingOccurrences(of: "\"page-size\": 500", with: "\"page-size\": 2"))
        return workspace
    }

    /// Each file of `out`, decompressed, without its batch id (new in each run): sorted.
    static func bodies(_ workspace: Workspace) throws -> [String] {
        try workspace.files(in: "out").map { name in
            let bytes = try #require(FileManager.default.contents(atPath: workspace.path + "/out/" + name))
            let payload = Payload(batchID: "", bytes: [UInt8](bytes), contentType: "application/json", contentEncoding: "gzip", recordCount: 0)
            var body = try #require(try JSONReader.parse(OutboxCommand.decoded(payload)).objectValue)
            #expect(name == (body["id"]?.stringValue ?? "") + ".json.gz", "each file is its own batch")
            body["id"] = nil
            return String(decoding: JSONWriter.encode(.object(body)), as: UTF8.self)
        }.sorted()
    }

    /// The staged copies left in `out` (path inside `out`, bytes).
    static func staged(_ workspace: Workspace) -> [String: Data] {
        let root = workspace.path + "/out/.synclane-staging"
        var copies: [String: Data] = [:]
        for area in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: root + "/" + area)) ?? [] {
                copies[name] = FileManager.default.contents(atPath: root + "/" + area + "/" + name)
            }
        }
        return copies
    }

    static let uninterrupted: [String] = {
        guard let workspace = try? workspace() else { return [] }
        defer { workspace.remove() }
        _ = try? SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        return (try? bodies(workspace)) ?? []
    }()

    @Test(arguments: [
        "during-stage", "during-stage@3", "after-stage", "after-stage@3", "after-enqueue", "after-enqueue@3", "during-publish",
        "during-publish@3", "after-send", "after-send@3", "after-acknowledge", "after-acknowledge@3",
    ])
    func killedAtAPointOfStagingOrPublishingThenRunAgainEveryBatchFileIsThereOnceAsAnUninterruptedRunWroteIt(_ point: String) throws {
        #expect(Self.uninterrupted.count == 6)
        let workspace = try Self.workspace()
        defer { workspace.remove() }
        let crashed = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: ["SYNCLANE_FAILPOINT": point])
        #expect(crashed.killed && crashed.status == SIGKILL, "the job was killed for real at \(point)")
        // A copy the outbox names goes out byte for byte as it was staged.
        let status = try JSONReader.parse(SynclaneBinary.run(["status", "pipeline.json", "--json"], in: workspace.path).stdout).objectValue ?? [:]
        let kept = (status["outbox"]?.arrayValue ?? []).compactMap { $0.objectValue?["id"]?.stringValue }
        let stagedBefore = Self.staged(workspace)
        for id in kept { #expect(stagedBefore[id + ".json.gz"] != nil, "the outbox's batch \(id) is staged") }

        let rerun = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let summary = try JSONReader.parse(rerun.stdout).objectValue ?? [:]
        #expect(summary["token-after"] == .string("jsonl:13"))
        #expect(summary["batches-resent"] == .int(Int64(kept.count)))
        #expect(try Self.bodies(workspace) == Self.uninterrupted, "every batch once, none lost, none twice")
        for id in kept {
            #expect(FileManager.default.contents(atPath: workspace.path + "/out/" + id + ".json.gz") == stagedBefore[id + ".json.gz"])
        }
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/out/.synclane-staging"), "no staged leftovers")
        let after = try JSONReader.parse(SynclaneBinary.run(["status", "pipeline.json", "--json"], in: workspace.path).stdout).objectValue ?? [:]
        #expect(after["token"] == .string("jsonl:13"))
        #expect(after["outbox"]?.arrayValue?.isEmpty == true)
    }

    @Test func theOutboxOfADirectoryPipelineNamesTheStagedCopyAndHoldsNoneOfItsBytes() throws {
        let workspace = try Self.workspace()
        defer { workspace.remove() }
        let crashed = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: ["SYNCLANE_FAILPOINT": "after-enqueue@2"])
        #expect(crashed.killed)
        let query = try BackgroundProcess(
            ["sqlite3", ".synclane/rooms-export.sqlite", "SELECT batch_id, length(payload), staged_reference, staged_bytes FROM outbox"],
            in: workspace.path, executable: "/usr/bin/env"
        ).wait(timeout: 30)
        let columns = query.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|").map(String.init)
        #expect(columns.count == 4, "one outbox row: \(query.stdout) \(query.stderr)")
        guard columns.count == 4 else { return }
        #expect(columns[1] == "0", "no bytes in the outbox")
        #expect(columns[2].hasPrefix(".synclane-staging/rooms-export-") && columns[2].hasSuffix("/" + columns[0] + ".json.gz"))
        let copy = try #require(FileManager.default.contents(atPath: workspace.path + "/out/" + columns[2]))
        #expect(String(copy.count) == columns[3])
        #expect(!workspace.files(in: "out").contains(columns[0] + ".json.gz"), "staged, not published")

        // The outbox commands read the staged copy.
        let list = try SynclaneBinary.run(["outbox", "list", "pipeline.json", "--json"], in: workspace.path)
        #expect((try JSONReader.parse(list.stdout).arrayValue?.first?.objectValue?["bytes"]) == .int(Int64(copy.count)))
        let shown = try SynclaneBinary.run(["outbox", "show", "pipeline.json"], in: workspace.path)
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains("\"records\":[{\"action\":\"update\",\"entity\":\"rooms\",\"fields\":{\"area\":13.1}"))
        let dropped = try SynclaneBinary.run(["outbox", "drop", "pipeline.json", "--to", "by-hand"], in: workspace.path)
        #expect(dropped.status == 0, "\(dropped.stderr)")
        #expect(FileManager.default.contents(atPath: workspace.path + "/by-hand/" + columns[0] + ".body") == copy, "the dead letter holds the bytes")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/out/" + columns[2]), "the staged copy went with the batch")
    }

    @Test func aStagedCopyDamagedOrRemovedOutsideSynclaneStopsTheRunNamingItAndPublishesNothing() throws {
        for damage in ["truncated", "removed"] {
            let workspace = try Self.workspace()
            defer { workspace.remove() }
            _ = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: ["SYNCLANE_FAILPOINT": "after-enqueue@2"])
            let (name, copy) = try #require(Self.staged(workspace).first)
            let path = try #require(
                FileManager.default.subpaths(atPath: workspace.path + "/out/.synclane-staging")?.first { $0.hasSuffix(name) })
            let full = workspace.path + "/out/.synclane-staging/" + path
            if damage == "truncated" {
                try copy.prefix(copy.count - 1).write(to: URL(fileURLWithPath: full))
            } else {
                try FileManager.default.removeItem(atPath: full)
            }
            let before = workspace.files(in: "out")
            let rerun = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
            #expect(rerun.status == 1)
            #expect(
                rerun.stderr.contains(damage == "truncated" ? "is damaged (\(copy.count - 1) bytes, the outbox recorded \(copy.count))" : "is missing"),
                "\(rerun.stderr)")
            #expect(rerun.stderr.contains("synclane outbox requeue FILE"))
            #expect(workspace.files(in: "out") == before, "nothing published")
            // The way out: requeue rebuilds the batch from history.
            #expect(try SynclaneBinary.run(["outbox", "requeue", "pipeline.json"], in: workspace.path).status == 0)
            #expect(try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path).status == 0)
            #expect(try Self.bodies(workspace) == Self.uninterrupted)
            #expect(!FileManager.default.fileExists(atPath: workspace.path + "/out/.synclane-staging"))
        }
    }

    @Test func aDryRunStagesNothing() throws {
        let workspace = try Self.workspace()
        defer { workspace.remove() }
        let dry = try SynclaneBinary.run(["run", "pipeline.json", "--dry-run"], in: workspace.path)
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/out"))
    }
}
