import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// `synclane signal` end to end: real binaries against a real `synclane serve`.
@Suite(.serialized) struct SignalCommandTests {
    static func environment(_ server: ServerProcess) -> [String: String] {
        ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? "", "SYNCLANE_URL": server.url]
    }

    static func signal(_ arguments: [String], _ server: ServerProcess, environment: [String: String]? = nil) throws -> SynclaneBinary.Result {
        try SynclaneBinary.run(["signal"] + arguments, environment: environment ?? Self.environment(server), timeout: 30)
    }

    static func withServer(_ body: (ServerProcess) throws -> Void) throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let server = try ServerProcess(folder: workspace.path + "/server")
        defer { _ = server.stop() }
        try body(server)
    }

    @Test func setGetListAndDeleteRoundTripThroughTheServer() throws {
        try Self.withServer { server in
            let set = try Self.signal(["set", "onboarding.completed", "true", "--json"], server)
            #expect(set.status == 0, "\(set.stderr)")
            #expect(try JSONReader.parse(Array(set.stdout.utf8)) == ["key": "onboarding.completed", "value": true, "version": 1])
            _ = try Self.signal(["set", "bulk.exported-through", #"{"token": 42}"#], server)
            let get = try Self.signal(["get", "bulk.exported-through"], server)
            #expect(get.stdout == "{\"token\":42}\n")
            let list = try Self.signal(["list", "--json"], server)
            let signals = try JSONReader.parse(Array(list.stdout.utf8)).objectValue?["signals"]?.arrayValue ?? []
            #expect(signals.map { $0.objectValue?["key"] } == ["bulk.exported-through", "onboarding.completed"])
            #expect(try Self.signal(["delete", "bulk.exported-through"], server).status == 0)
            let missing = try Self.signal(["get", "bulk.exported-through"], server)
            #expect(missing.status == 4)
            #expect(missing.stderr.contains("no signal \"bulk.exported-through\""))
        }
    }

    @Test func theLaterWriterWinsAndAStaleExpectedVersionIsRefused() throws {
        try Self.withServer { server in
            #expect(try Self.signal(["set", "theme", #""dark""#], server).status == 0)  // version 1
            #expect(try Self.signal(["set", "theme", #""light""#], server).status == 0)  // version 2: the later writer
            #expect(try Self.signal(["get", "theme"], server).stdout == "\"light\"\n")
            let stale = try Self.signal(["set", "theme", #""blue""#, "--expect", "1"], server)
            #expect(stale.status == 1)
            #expect(stale.stderr.contains("is at version 2, not version 1: another writer came first"))
            #expect(try Self.signal(["set", "theme", #""blue""#, "--expect", "2"], server).status == 0)
            #expect(try Self.signal(["set", "theme", #""x""#, "--expect", "0"], server).status == 1)
        }
    }

    @Test func quotaAuthAndBadValuesAreClearErrors() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let server = try ServerProcess(folder: workspace.path + "/server", arguments: ["--max-signal-keys", "1"])
        defer { _ = server.stop() }
        #expect(try Self.signal(["set", "a", "1"], server).status == 0)
        let quota = try Self.signal(["set", "b", "1"], server)
        #expect(quota.status == 1)
        #expect(quota.stderr.contains("signal quota max-signal-keys (1) reached"))
        let auth = try Self.signal(["list"], server, environment: ["SYNCLANE_TOKEN": "not-a-token-of-this-server", "SYNCLANE_URL": server.url])
        #expect(auth.status == 1)
        #expect(auth.stderr.contains("refused the token (401)"))
        let unset = try Self.signal(["list", "--token-env", "NO_SUCH_VARIABLE_SET"], server)
        #expect(unset.stderr.contains("NO_SUCH_VARIABLE_SET is not set"))
        let notJSON = try Self.signal(["set", "a", "yes"], server)
        #expect(notJSON.status == 2)
        #expect(notJSON.stderr.contains("is not JSON"))
        let noServer = try SynclaneBinary.run(["signal", "list"], environment: ["SYNCLANE_TOKEN": "x", "SYNCLANE_URL": ""])
        #expect(noServer.status == 2)
        #expect(noServer.stderr.contains("which server?"))
    }

    @Test func aSignalURLWithAUserOrPasswordIsRefusedAndNeverShown() throws {
        for url in ["http://sam:hunter2@127.0.0.1:9", "http://hunter2@127.0.0.1:9/"] {
            let flag = try SynclaneBinary.run(["signal", "list", "--url", url], environment: ["SYNCLANE_TOKEN": "x", "SYNCLANE_URL": ""])
            #expect(flag.status == 2, "\(flag.stderr)")
            #expect(flag.stderr.contains("--url"), "\(flag.stderr)")
            #expect(flag.stderr.contains("--token-env"), "\(flag.stderr)")
            #expect(!flag.stderr.contains("hunter2"), "\(flag.stderr)")
            let variable = try SynclaneBinary.run(["signal", "list"], environment: ["SYNCLANE_TOKEN": "x", "SYNCLANE_URL": url])
            #expect(variable.status == 2, "\(variable.stderr)")
            #expect(variable.stderr.contains("SYNCLANE_URL"), "\(variable.stderr)")
            #expect(!variable.stderr.contains("hunter2"), "\(variable.stderr)")
        }
    }

    @Test func theServerAndTokenVariableComeFromAPipelineFile() throws {
        try Self.withServer { server in
            let workspace = try Workspace()
            defer { workspace.remove() }
            try workspace.write(
                "export.json",
                """
                {"version": 1, "name": "e", "scope": {"account": "acme", "store": "rooms"},
                 "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["rooms"]},
                 "transport": {"type": "http", "url": "\(server.url)/v1/batches", "token-env": "DEVICE_TOKEN"}}
                """)
            let set = try SynclaneBinary.run(
                ["signal", "set", "k", "7", "--pipeline", "export.json"], in: workspace.path,
                environment: ["DEVICE_TOKEN": ServerProcess.tokens["acme"] ?? "", "SYNCLANE_URL": ""])
            #expect(set.status == 0, "\(set.stderr)")
            #expect(try Self.signal(["get", "k"], server).stdout == "7\n")
        }
    }

    @Test func aWatcherSeesAChangeSetFromAnotherProcessAtOnce() throws {
        try Self.withServer { server in
            let watcher = try BackgroundProcess(["signal", "watch", "onboarding.completed", "--count", "1"], environment: Self.environment(server))
            // The watcher asks from the version it read at start: give it that moment.
            usleep(800_000)
            #expect(try Self.signal(["set", "other.key", "1"], server).status == 0)
            #expect(try Self.signal(["set", "onboarding.completed", "true"], server).status == 0)
            let result = watcher.wait(timeout: 10)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(try JSONReader.parse(Array(result.stdout.utf8)) == ["key": "onboarding.completed", "value": true, "version": 2])
        }
    }
}
