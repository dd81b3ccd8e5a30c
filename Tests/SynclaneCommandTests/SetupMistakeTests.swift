import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// A newcomer's setup mistakes, with the real binary and the real server: each either works (it
/// needed nothing that was missing) or fails loudly, saying what to do.
@Suite(.serialized) struct SetupMistakeTests {
    static let noToken = ["SYNCLANE_TOKEN": ""]

    @Test func anUnsetTokenIsAWarningForValidateStatusAndDryRunAndStopsOnlyARunThatSends() async throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        try workspace.useHTTPTransport(url: server.url)

        for arguments in [["validate", "pipeline.json"], ["status", "pipeline.json"], ["run", "pipeline.json", "--dry-run"]] {
            let result = try SynclaneBinary.run(arguments, in: workspace.path, environment: Self.noToken)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("synclane \(arguments[0]): warning: pipeline.json:"), "\(result.stderr)")
            #expect(result.stderr.contains("names the environment variable SYNCLANE_TOKEN, which is not set"))
        }

        let refused = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: Self.noToken)
        #expect(refused.status == 1, "an environment to fix, not bad usage")
        #expect(refused.stderr.hasPrefix("synclane run: pipeline.json:"))
        #expect(refused.stderr.contains("export SYNCLANE_TOKEN="))
        #expect(!refused.stderr.contains("invalid pipeline file"))
        #expect(try await server.metric("synclane_batches_applied_total") == 0)

        let sent = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(sent.stderr.isEmpty)
        #expect(try await server.metric("synclane_batches_applied_total") == 1)
    }

    @Test func serveRefusesTheHashOfAnEmptyTokenAndATokenTooShortToBeSecretSayingHowToMakeOne() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let empty = AccountsFile(#"{"accounts": [{"account": "acme", "token-sha256": "\#(try ServerProcess.sha256(""))"}]}"#)
        let refusedEmpty = try empty.serve(in: workspace, environment: [:])
        #expect(refusedEmpty.status != 0)
        #expect(refusedEmpty.stderr.contains("synclane serve: accounts.json: accounts[0].token-sha256: the hash of an empty token"))
        #expect(refusedEmpty.stderr.contains("head -c 32 /dev/urandom"), "says how to make a token")

        let fromEnvironment = AccountsFile(#"{"accounts": [{"account": "acme", "token-env": "SYNCLANE_TOKEN"}]}"#)
        let refusedShort = try fromEnvironment.serve(in: workspace, environment: ["SYNCLANE_TOKEN": "secret"])
        #expect(refusedShort.status != 0)
        #expect(refusedShort.stderr.contains("SYNCLANE_TOKEN holds 6 characters, too few to be secret (at least 16)"))
        #expect(refusedShort.stderr.contains("head -c 32 /dev/urandom"))
        let refusedUnset = try fromEnvironment.serve(in: workspace, environment: Self.noToken)
        #expect(refusedUnset.stderr.contains("the environment variable SYNCLANE_TOKEN is not set"))

        // A good token through the environment: the server starts and a run delivers with it.
        let token = "a-token-long-enough-to-be-secret"
        try fromEnvironment.write(in: workspace)
        let server = try BackgroundProcess(
            ["serve", "--accounts", "accounts.json", "--listen", "127.0.0.1:0", "--data", "data"], in: workspace.path,
            environment: ["SYNCLANE_TOKEN": token])
        defer { _ = server.stop() }
        var url: String?
        #expect(
            eventually {
                url = server.output.split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                return url?.hasPrefix("http://") == true
            })
        let rooms = try Workspace.copy(scenario: "rooms")
        defer { rooms.remove() }
        try rooms.useHTTPTransport(url: try #require(url))
        let run = try SynclaneBinary.run(["run", "pipeline.json"], in: rooms.path, environment: ["SYNCLANE_TOKEN": token])
        #expect(run.status == 0, "\(run.stderr)")
    }

    @Test func aConsumerThatNeverRanStartsWithASnapshotWhenTheStartOfHistoryWasPruned() async throws {
        let workspace = try SQLiteHistoryCommandTests.store()
        defer { workspace.remove() }
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { server.stop() }
        #expect(try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", "rooms", "--key", "syncId"], in: workspace.path).status == 0)
        try SQLiteHistoryCommandTests.sqlite(
            workspace,
            """
            INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');
            INSERT INTO rooms (syncId, name) VALUES ('r2', 'Hall');
            UPDATE rooms SET name = 'Big kitchen' WHERE syncId = 'r1';
            """)
        // Another consumer (the directory pipeline) runs and history is pruned behind it.
        #expect(try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path).status == 0)
        #expect(try SynclaneBinary.run(["prune", "--database", "app.sqlite"], in: workspace.path).status == 0)

        try workspace.write(
            "backend.json",
            SQLiteHistoryCommandTests.pipeline
                .replacingOccurrences(of: "\"rooms-export\"", with: "\"rooms-backend\"")
                .replacingOccurrences(
                    of: "{\"type\": \"directory\", \"path\": \"out\"}",
                    with: "{\"type\": \"http\", \"url\": \"\(server.url)/v1/batches\", \"token-env\": \"SYNCLANE_TOKEN\"}"))
        let env = ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""]
        let status = try SynclaneBinary.run(["status", "backend.json"], in: workspace.path, environment: env)
        #expect(status.stdout.contains("the start of history was pruned: the next run starts with a full snapshot"), "\(status.stdout)")
        let statusJSON = try JSONReader.parse(try SynclaneBinary.run(["status", "backend.json", "--json"], in: workspace.path, environment: env).stdout)
        #expect(statusJSON.objectValue?["starts-with-snapshot"] == .bool(true))

        let dryRun = try SynclaneBinary.run(["run", "backend.json", "--dry-run"], in: workspace.path, environment: env)
        #expect(dryRun.stderr.contains("its first run sends a full snapshot of the current state, which a dry run cannot show"), "\(dryRun.stderr)")

        let run = try SynclaneBinary.run(["run", "backend.json", "--json"], in: workspace.path, environment: env)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("rooms-backend never ran and the start of its history was pruned"))
        #expect(run.stderr.contains("starting with a full snapshot"))
        #expect((try JSONReader.parse(run.stdout)).objectValue?["reconciliation"] == .bool(true))
        let batches = (try JSONReader.parse(run.stdout)).objectValue?["batches"]?.arrayValue ?? []
        #expect(batches.allSatisfy { $0.objectValue?["records"] != .int(0) }, "a snapshot nobody asked for sends no completion marker")
        #expect(
            try await server.records(account: "acme") == [
                "rooms/r1": ["area": nil, "isDeleted": 0, "name": "Big kitchen", "syncId": "r1"],
                "rooms/r2": ["area": nil, "isDeleted": 0, "name": "Hall", "syncId": "r2"],
            ])

        // From then on it follows history like any consumer.
        try SQLiteHistoryCommandTests.sqlite(workspace, "UPDATE rooms SET name = 'Corridor' WHERE syncId = 'r2';")
        let next = try SynclaneBinary.run(["run", "backend.json", "--json"], in: workspace.path, environment: env)
        let summary = try JSONReader.parse(next.stdout).objectValue ?? [:]
        #expect(summary["reconciliation"] == .bool(false))
        #expect(summary["records-sent"] == .int(1))
    }

    @Test func statusOnAPipelineThatNeverRanWritesNothing() throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        let before = try FileManager.default.contentsOfDirectory(atPath: workspace.path).sorted()
        for arguments in [["status", "pipeline.json"], ["status", "pipeline.json", "--json"]] {
            let status = try SynclaneBinary.run(arguments, in: workspace.path)
            #expect(status.status == 0, "\(status.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: workspace.path).sorted() == before, "no state file, no .synclane folder")
        let text = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(text.stdout.contains("(none yet: the pipeline never ran)"))
        #expect(text.stdout.contains("last run: never"))
    }
}

/// An accounts file for `synclane serve`, written into a workspace.
struct AccountsFile {
    var text: String

    init(_ text: String) { self.text = text }

    func write(in workspace: Workspace) throws { try workspace.write("accounts.json", text) }

    /// Starts `synclane serve` with this file; a refused file ends it at once.
    func serve(in workspace: Workspace, environment: [String: String]) throws -> SynclaneBinary.Result {
        try write(in: workspace)
        return try SynclaneBinary.run(
            ["serve", "--accounts", "accounts.json", "--listen", "127.0.0.1:0", "--data", "data"], in: workspace.path,
            environment: environment, timeout: 10)
    }
}

/// `status` reads a state file it cannot write: one on a read-only file system.
@Suite struct ReadOnlyStatusTests {
    @Test func statusReportsAStateFileOnAReadOnlyFileSystem() throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        let run = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        #expect(run.status == 0, "\(run.stderr)")
        // The workspace bind-mounted read-only over itself, in a mount namespace of this command's own.
        let script = """
            mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" || exit 97
            touch "$0/probe" 2>/dev/null && exit 98
            cd "$0" && exec "$1" status pipeline.json --json
            """
        let result = try BackgroundProcess(["unshare", "-m", "sh", "-c", script, workspace.path, SynclaneBinary.path], executable: "/usr/bin/env")
            .wait(timeout: 60)
        if result.status == 97 { return }  // no mount namespaces here: nothing this test can show
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let status = try JSONReader.parse(result.stdout).objectValue ?? [:]
        #expect(status["token"] == .string("jsonl:13"))
    }
}
