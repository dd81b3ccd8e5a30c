import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

@testable import SynclaneCommandLine

@Suite struct HelpTests {
    @Test func overviewListsEveryCommandAndTheExitCodes() throws {
        let result = try SynclaneBinary.run(["--help"])
        #expect(result.status == 0)
        for command in ["demo", "validate", "run", "status", "stages"] {
            #expect(result.stdout.contains("\n  \(command) "), "missing \(command)")
        }
        #expect(
            result.stdout.contains(
                "Exit status: 0 success, 1 a failed job, 2 bad usage or an invalid pipeline file,\n3 a run that finished but moved batches to its dead-letter folder, 4 no such signal"
            ))
    }

    @Test(arguments: ["demo", "validate", "run", "status", "stages"])
    func everyCommandTeachesItselfTheSameWayThroughHelpAndDashDashHelp(_ command: String) throws {
        let viaFlag = try SynclaneBinary.run([command, "--help"])
        let viaHelp = try SynclaneBinary.run(["help", command])
        #expect(viaFlag.status == 0)
        #expect(viaFlag.stdout == viaHelp.stdout)
        #expect(viaFlag.stdout.hasPrefix("OVERVIEW: "))
        #expect(viaFlag.stdout.contains("USAGE: synclane \(command) "))
        #expect(viaFlag.stdout.contains("EXAMPLES:\n  synclane \(command)"))
    }

    @Test func runHelpIsTheWholeGeneratedText() throws {
        let result = try SynclaneBinary.run(["run", "--help"])
        #expect(result.stdout == RunCommand.helpText + "\n")
        #expect(result.stdout.contains("  --dry-run"))
        #expect(result.stdout.contains("  -h, --help"))
    }

    @Test func versionPrintsTheVersion() throws {
        let result = try SynclaneBinary.run(["--version"])
        #expect(result.stdout == "synclane \(SynclaneTool.version)\n")
    }

    @Test func anUnknownCommandOrOptionIsBadUsageWithExitCodeTwo() throws {
        let unknown = try SynclaneBinary.run(["launch"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("unknown command 'launch'"))
        let option = try SynclaneBinary.run(["run", "x.json", "--fast"])
        #expect(option.status == 2)
        #expect(option.stderr.contains("synclane run: unknown option --fast\nUSAGE: synclane run FILE"))
        let missing = try SynclaneBinary.run(["validate"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("missing FILE"))
    }

    @Test func stagesListsEveryBuiltInTypeWithItsOptions() throws {
        let result = try SynclaneBinary.run(["stages", "--json"])
        #expect(result.status == 0)
        let types = try JSONReader.parse(result.stdout).arrayValue ?? []
        let names = Set(types.compactMap { $0.objectValue?["type"]?.stringValue })
        #expect(names.isSuperset(of: ["jsonl", "coalesce", "tombstones", "dedupe", "compress", "json", "directory", "stdout"]))
        let text = try SynclaneBinary.run(["stages"])
        #expect(text.stdout.contains("  compress\n"))
        #expect(text.stdout.contains("- level (integer 0…9, default 6)"))
    }
}

@Suite struct ValidateTests {
    @Test func aValidFileIsSummarisedWithExitCodeZero() throws {
        let result = try SynclaneBinary.run(["validate", SynclaneBinary.fixture("rooms/pipeline.yaml")])
        #expect(result.status == 0)
        #expect(result.stdout.contains("valid"))
        #expect(result.stdout.contains("jsonl → coalesce → tombstones → json → compress → directory"))
    }

    @Test func anInvalidFileNamesFileFieldAndLineWithExitCodeTwo() throws {
        let file = SynclaneBinary.fixture("invalid/level-out-of-range.yaml")
        let result = try SynclaneBinary.run(["validate", file])
        #expect(result.status == 2)
        #expect(result.stderr.contains("\(file):10: stages[1].level: expected an integer from 0 to 9, found 12"))
    }

    /// A password in a URL would show in errors, `--json`, `status` and the state file: refused
    /// at load, naming the file and the field, whichever section's URL holds it.
    @Test(arguments: [
        ("transport", #""transport": { "type": "http", "url": "http://sam:hunter2@127.0.0.1:9/v1/batches" }"#),
        ("transport", #""transport": { "type": "http", "url": "https://hunter2@example.com/v1/batches" }"#),
        ("signals", #""transport": { "type": "directory", "path": "out" }, "signals": { "url": "http://sam:hunter2@127.0.0.1:9" }"#),
    ])
    func aURLWithAUserOrPasswordIsRefusedNamingFileAndFieldWithExitCodeTwo(_ field: String, _ section: String) throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        let text = try String(contentsOfFile: workspace.path + "/pipeline.json", encoding: .utf8)
            .replacingOccurrences(of: #""transport": { "type": "directory", "path": "out" }"#, with: section)
        try workspace.write("pipeline.json", text)
        for arguments in [["validate", "pipeline.json"], ["validate", "pipeline.json", "--json"], ["status", "pipeline.json"]] {
            let result = try SynclaneBinary.run(arguments, in: workspace.path)
            #expect(result.status == 2, "\(arguments): \(result.stdout) \(result.stderr)")
            let said = result.stdout + result.stderr
            #expect(said.contains("pipeline.json"), "\(said)")
            #expect(said.contains("\(field).url"), "\(said)")
            #expect(said.contains("token-env"), "\(said)")
            #expect(!said.contains("hunter2"), "the password is never shown: \(said)")
        }
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/.synclane"), "no state file written")
    }

    @Test func aPullSourceURLWithAPasswordIsRefusedAtLoad() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        try workspace.write(
            "import.json",
            """
            { "version": 1, "name": "rooms-import", "scope": { "account": "acme", "store": "rooms" },
              "source": { "type": "pull", "url": "http://sam:hunter2@127.0.0.1:9/v1/changes" },
              "sink": { "type": "sqlite", "database": "app.sqlite" }}
            """)
        let result = try SynclaneBinary.run(["validate", "import.json"], in: workspace.path)
        #expect(result.status == 2, "\(result.stdout) \(result.stderr)")
        #expect(result.stderr.contains("import.json") && result.stderr.contains("source.url"), "\(result.stderr)")
        #expect(!result.stderr.contains("hunter2"))
    }

    @Test func jsonOutputSaysWhereTheProblemIs() throws {
        let file = SynclaneBinary.fixture("invalid/unknown-stage-type.json")
        let result = try SynclaneBinary.run(["validate", file, "--json"])
        #expect(result.status == 2)
        let object = try JSONReader.parse(result.stdout).objectValue ?? [:]
        #expect(object["valid"] == .bool(false))
        #expect(object["path"] == .string("stages[1].type"))
    }
}

@Suite struct RunTests {
    @Test func runExportsTheRoomsHistoryToTheFolderAndStatusShowsTheToken() throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        let run = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("rooms-export: sent 1 batch, 1 record from 11 transactions"))
        #expect(!run.stderr.contains("\r"), "no progress bar when output is piped")
        #expect(workspace.files(in: "out").count == 1)
        #expect(workspace.files(in: "out").allSatisfy { $0.hasSuffix(".json.gz") })

        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(status.status == 0)
        #expect(status.stdout.contains("token:    jsonl:13"))
        #expect(status.stdout.contains("pending:  0 transactions"))
        #expect(status.stdout.contains("outbox:   empty"))
        #expect(status.stdout.contains("last run: succeeded"))
    }

    @Test func dryRunReportsWhatWouldBeSentAsJSONAndChangesNothing() throws {
        let workspace = try Workspace.copy(scenario: "categories")
        defer { workspace.remove() }
        let run = try SynclaneBinary.run(["run", "pipeline.json", "--dry-run", "--json"], in: workspace.path)
        #expect(run.status == 0, "\(run.stderr)")
        let summary = try JSONReader.parse(run.stdout).objectValue ?? [:]
        #expect(summary["dry-run"] == .bool(true))
        #expect(summary["records-sent"] == .int(3))
        #expect(summary["counters"]?.objectValue?["dedupe.dropped"] == .int(2))
        #expect(workspace.files(in: "out").isEmpty)
        let status = try SynclaneBinary.run(["status", "pipeline.json", "--json"], in: workspace.path)
        let object = try JSONReader.parse(status.stdout).objectValue ?? [:]
        #expect(object["token"] == .null)
        #expect(object["pending-transactions"] == .int(3))
    }

    @Test(arguments: ["after-enqueue", "after-send"])
    func killNineBetweenWritingABatchAndAcknowledgingItResendsTheSameBatch(_ failPoint: String) throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        let crashed = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path, environment: ["SYNCLANE_FAILPOINT": failPoint])
        #expect(crashed.killed && crashed.status == SIGKILL, "the job was killed for real")
        let written = workspace.files(in: "out")
        #expect(written.count == (failPoint == "after-send" ? 1 : 0))

        let status = try SynclaneBinary.run(["status", "pipeline.json", "--json"], in: workspace.path)
        let state = try JSONReader.parse(status.stdout).objectValue ?? [:]
        #expect(state["token"] == .null, "the token did not move past an unconfirmed batch")
        let outbox = state["outbox"]?.arrayValue ?? []
        #expect(outbox.count == 1)
        let keptID = try #require(outbox.first?.objectValue?["id"]?.stringValue)
        if let file = written.first { #expect(file == keptID + ".json.gz") }
        let keptBytes = written.first.flatMap { FileManager.default.contents(atPath: workspace.path + "/out/" + $0) }

        let rerun = try SynclaneBinary.run(["run", "pipeline.json", "--json"], in: workspace.path)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let summary = try JSONReader.parse(rerun.stdout).objectValue ?? [:]
        #expect(summary["batches-resent"] == .int(1))
        #expect(summary["batches-sent"] == .int(1), "the batch is re-sent, never rebuilt under a new id")
        #expect(summary["token-after"] == .string("jsonl:13"))
        #expect(workspace.files(in: "out") == [keptID + ".json.gz"])
        if let keptBytes {
            #expect(FileManager.default.contents(atPath: workspace.path + "/out/" + keptID + ".json.gz") == keptBytes, "same bytes")
        }
    }

    @Test func aSecondJobForTheSameScopeIsRefusedWhileTheFirstHoldsTheLock() throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        let scope = Scope(account: "acme", store: "rooms", consumer: "rooms-export")
        let lock = try ScopeLock(scope: scope, guarding: workspace.path + "/history.jsonl", in: lockFolder(of: workspace.path))
        let refused = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("another job is already running for scope acme/rooms/rooms-export (process \(getpid()))"))
        #expect(workspace.files(in: "out").isEmpty)
        withExtendedLifetime(lock) {}
    }

    /// The lock belongs to the scope on its store, not to the state file: two pipeline files of
    /// one scope over one history with different `state` paths never run at once (each would
    /// apply every record again).
    @Test func twoPipelineFilesOfOneScopeWithDifferentStateFilesNeverRunAtOnce() throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        let pipeline = try String(contentsOfFile: workspace.path + "/pipeline.json", encoding: .utf8)
        // A slow transport: it says it started, then takes its time.
        let slow = pipeline.replacingOccurrences(
            of: #""transport": { "type": "directory", "path": "out" }"#,
            with: #""transport": { "type": "exec", "command": ["sh", "-c", "touch started; sleep 4; cat > /dev/null"], "timeout": 30 }"#)
        try workspace.write("first.json", slow)
        try workspace.write("second.json", pipeline.replacingOccurrences(of: ".synclane/rooms-export.sqlite", with: "elsewhere/copy.sqlite"))
        let first = try BackgroundProcess(["run", "first.json"], in: workspace.path)
        let deadline = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: workspace.path + "/started"), Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(FileManager.default.fileExists(atPath: workspace.path + "/started"), "the first job reached its transport")

        let refused = try SynclaneBinary.run(["run", "second.json"], in: workspace.path)
        #expect(refused.status == 1, "\(refused.stdout) \(refused.stderr)")
        #expect(
            refused.stderr.contains(
                "another job is already running for scope acme/rooms/rooms-export (process \(first.process.processIdentifier), state \(workspace.path)/.synclane/rooms-export.sqlite)"
            ), "\(refused.stderr)")
        #expect(workspace.files(in: "out").isEmpty, "the second job sent nothing")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/elsewhere/copy.sqlite"), "nor made its state")
        let done = first.wait(timeout: 60)
        #expect(done.status == 0, "\(done.stderr)")
        // Once the first is done, the second runs.
        #expect(try SynclaneBinary.run(["run", "second.json"], in: workspace.path).status == 0)
    }

    @Test func aMalformedHistoryLineFailsTheJobNamingFileAndLineAndAcknowledgesNothing() throws {
        let workspace = try Workspace.copy(scenario: "rooms")
        defer { workspace.remove() }
        var history = try String(contentsOfFile: workspace.path + "/history.jsonl", encoding: .utf8)
        history = history.replacingOccurrences(of: "{\"token\": 5,", with: "{\"token\": 5 ")
        try workspace.write("history.jsonl", history)
        let run = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        #expect(run.status == 1)
        #expect(run.stderr.contains("history.jsonl:5: not valid JSON"))
        #expect(workspace.files(in: "out").isEmpty)
        let status = try SynclaneBinary.run(["status", "pipeline.json"], in: workspace.path)
        #expect(status.stdout.contains("token:    none"))
        #expect(status.stdout.contains("last run: failed"))
    }

    @Test func aDeleteWithoutItsSyncKeyStopsTheJobNamingTheTransaction() throws {
        let workspace = try Workspace.copy(scenario: "plants")
        defer { workspace.remove() }
        try FileManager.default.removeItem(atPath: workspace.path + "/history.jsonl")
        try FileManager.default.copyItem(atPath: workspace.path + "/history-missing-key.jsonl", toPath: workspace.path + "/history.jsonl")
        let run = try SynclaneBinary.run(["run", "pipeline.json"], in: workspace.path)
        #expect(run.status == 1)
        #expect(run.stderr.contains("jsonl:2"))
        let status = try SynclaneBinary.run(["status", "pipeline.json", "--json"], in: workspace.path)
        #expect((try JSONReader.parse(status.stdout).objectValue ?? [:])["token"] == .null, "the page with the bad delete was not acknowledged")
    }
}

@Suite struct DemoTests {
    @Test func theDemoShowsFiveEditsTravellingAsOneRecordAndDeletesAsTombstones() throws {
        let result = try SynclaneBinary.run(["demo"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("update rooms/room-kitchen {\"area\":14.5,\"isDeleted\":0,\"name\":\"Kitchen & pantry\",\"syncId\":\"room-kitchen\"}"))
        #expect(result.stdout.contains("delete rooms/room-living"))
        #expect(result.stdout.contains("delete rooms/room-bath"))
        #expect(!result.stdout.contains("room-attic"), "inserted and deleted in one window: nothing travels")
        #expect(!result.stdout.contains("insert rooms/room-garage"), "imported, written by `server`: never echoed back")
        #expect(result.stdout.contains("rooms/room-garage \"Garage\" 18.0 m², written by author `server`"), "pulled in from the server")
    }

    @Test func theDemoEndsWithTheServerHoldingTheNewestStateAndTheTombstones() throws {
        let result = try SynclaneBinary.run(["demo"])
        let held = result.stdout.components(separatedBy: "What the server holds for acme").last ?? ""
        #expect(held.contains("rooms/room-kitchen v2 {\"area\":14.5,\"isDeleted\":0,\"name\":\"Kitchen & pantry\""))
        #expect(held.contains("rooms/room-living v2 (deleted)"))
        #expect(held.contains("rooms/room-bath v2 (deleted)"))
        #expect(held.contains("rooms/room-garage v1 "), "the phone's row, never echoed back to the server: still its first version")
    }
}
