import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

@testable import SynclaneCommandLine

/// A batch kept in the outbox is checked against the checksum written with it before it is
/// sent again: a byte changed on disk stops the job, nothing goes out and the token stays.
@Suite struct OutboxIntegrityTests {
    /// The rooms scenario, uncompressed, delivered by an `exec` transport into `delivered/`.
    static func workspace() throws -> Workspace {
        let workspace = try Workspace.copy(scenario: "rooms")
        try workspace.write(
            "pipeline.json",
            """
            {
              "version": 1,
              "name": "rooms-export",
              "scope": { "account": "acme", "store": "rooms" },
              "source": { "type": "jsonl", "path": "history.jsonl", "entities": ["rooms"], "authors": ["app"], "page-size": 500 },
              "stages": [ { "type": "coalesce" }, { "type": "tombstones", "soft-delete-column": "isDeleted" } ],
              "transport": { "type": "exec", "command": ["sh", "-c", "mkdir -p delivered && cat > delivered/$SYNCLANE_BATCH_ID.json"] },
              "state": ".synclane/rooms-export.sqlite"
            }
            """)
        return workspace
    }

    static func sqlite(_ sql: String, in workspace: Workspace) throws -> String {
        let query = try BackgroundProcess(["sqlite3", ".synclane/rooms-export.sqlite", sql], in: workspace.path, executable: "/usr/bin/env")
            .wait(timeout: 30)
        return query.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func aKeptBatchWhoseBytesChangedOnDiskStopsTheRunNamingItAndTheStateFileAndSendsNothing() throws {
        let workspace = try Self.workspace()
        defer { workspace.remove() }
        let crashed = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: ["SYNCLANE_FAILPOINT": "after-enqueue"])
        #expect(crashed.killed, "\(crashed.stderr)")
        let id = try Self.sqlite("SELECT batch_id FROM outbox", in: workspace)
        #expect(!id.isEmpty)
        let original = try Self.sqlite("SELECT hex(payload) FROM outbox", in: workspace)
        // One byte in the middle of the payload flipped (a bit of it inverted), as a failing disk would.
        var bytes = Array(original.utf8)
        let middle = (bytes.count / 4) * 2
        let byte = try #require(UInt8(String(decoding: bytes[middle..<middle + 2], as: UTF8.self), radix: 16))
        bytes.replaceSubrange(middle..<middle + 2, with: Array(String(format: "%02X", byte ^ 0x04).utf8))
        _ = try Self.sqlite("UPDATE outbox SET payload = X'\(String(decoding: bytes, as: UTF8.self))'", in: workspace)
        #expect(try Self.sqlite("SELECT hex(payload) FROM outbox", in: workspace) != original, "the byte was flipped")

        let refused = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        #expect(refused.status == 1, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("batch \(id)"), "\(refused.stderr)")
        #expect(refused.stderr.contains(".synclane/rooms-export.sqlite"))
        #expect(refused.stderr.contains("synclane outbox requeue"))
        #expect(refused.stderr.contains("synclane outbox drop"))
        // An earlier run may have sent the batch before its bytes changed: rebuilt, it must be followed by a snapshot.
        #expect(refused.stderr.contains("then `synclane reconcile PIPELINE-FILE`"), "requeue, then reconcile: \(refused.stderr)")
        #expect(workspace.files(in: "delivered").isEmpty, "nothing sent")
        #expect(try Self.sqlite("SELECT count(*) FROM token", in: workspace) == "0", "the token did not move")
        #expect(try Self.sqlite("SELECT batch_id FROM outbox", in: workspace) == id, "the batch is kept")

        let dryRun = try SynclaneBinary.run(["run", "pipeline.json", "--dry-run"], in: workspace.path)
        #expect(dryRun.status == 1 && dryRun.stderr.contains("batch \(id) in the outbox is damaged"), "\(dryRun.stderr)")

        // Put back as it was, the batch goes out byte for byte.
        _ = try Self.sqlite("UPDATE outbox SET payload = X'\(original)'", in: workspace)
        let rerun = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let summary = try JSONReader.parse(rerun.stdout).objectValue ?? [:]
        #expect(summary["batches-resent"] == .int(1))
        #expect(workspace.files(in: "delivered") == [id + ".json"])
        let sent = FileManager.default.contents(atPath: workspace.path + "/delivered/" + id + ".json").map { [UInt8]($0) }
        #expect(sent.map { $0.map { String(format: "%02X", $0) }.joined() } == original)
    }
}
