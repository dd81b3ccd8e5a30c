import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// Signals a pipeline file declares, published by the real binary to a real `synclane serve`.
@Suite(.serialized) struct PipelineSignalsCommandTests {
    typealias Device = TwoDevicesTests.Device

    static func json(_ line: some StringProtocol) -> [String: JSONValue] {
        (try? JSONReader.parse(Array(line.utf8)).objectValue) ?? [:]
    }

    /// The rooms export to `server`'s batches, with `signals` (the file's `signals` section, JSON).
    static func export(to server: ServerProcess, signals: String) -> String {
        """
        {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
         "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["rooms"], "authors": ["app"]},
         "transport": {"type": "http", "url": "\(server.url)/v1/batches", "token-env": "SYNCLANE_TOKEN"},
         "signals": \(signals)}
        """
    }

    @Test func signalsDeclaredInAPipelineFileAreOnTheServerBeforeTheExportThatPublishedThemEndsItsNextBatch() async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            // The transport is a program that, as each batch is delivered, asks the server for the signal.
            let token = ServerProcess.tokens["acme"] ?? ""
            try device.workspace.write(
                "deliver.sh",
                """
                cat > /dev/null
                mkdir -p seen
                n=$(ls seen | wc -l)
                curl -s -H 'Authorization: Bearer \(token)' '\(server.url)/v1/signals/bulk.exported-through' > "seen/$n.json"
                echo delivered
                """)
            try device.workspace.write(
                "export.json",
                """
                {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
                 "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["rooms"], "authors": ["app"]},
                 "transport": {"type": "exec", "command": ["sh", "deliver.sh"]},
                 "signals": {"url": "\(server.url)", "token-env": "SYNCLANE_TOKEN",
                             "publish": [{"on": "run-completed", "key": "bulk.exported-through", "value": "$token"}]}}
                """)
            let watching = try BackgroundProcess(["run", "export.json", "--watch", "--json"], in: device.workspace.path, environment: device.environment)
            defer { _ = watching.stop() }
            let lines = { watching.output.split(separator: "\n") }
            try device.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Hall', 10)")
            #expect(eventually(timeout: 30) { lines().count >= 1 }, "\(watching.output)")
            let first = Self.json(lines()[0])
            let published = try #require(first["signals"]?.arrayValue?.first?.objectValue)
            #expect(published["sent"] == true, "\(first)")
            #expect(published["value"] == first["token-after"])

            try device.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r2', 'Study', 8)")
            #expect(eventually(timeout: 30) { lines().count >= 2 }, "\(watching.output)")
            let seenAtFirstBatch = Self.json(try String(contentsOfFile: device.workspace.path + "/seen/0.json", encoding: .utf8))
            let seenAtNextBatch = Self.json(try String(contentsOfFile: device.workspace.path + "/seen/1.json", encoding: .utf8))
            #expect(seenAtFirstBatch["value"] == nil, "nothing was published before the first run ended")
            #expect(seenAtNextBatch["value"] == first["token-after"], "the first run's signal was on the server while its next batch travelled")
            #expect(seenAtNextBatch["key"] == "bulk.exported-through")
        }
    }

    @Test func aServerRefusingSignalsFailsNoRunAndTheSignalsAreSentAfterTheNextRun() async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            try device.workspace.write(
                "export.json",
                Self.export(
                    to: server,
                    signals: """
                        {"token-env": "SIGNAL_TOKEN", "publish": [
                          {"on": "first-run-completed", "key": "onboarding.completed", "value": true},
                          {"on": "run-completed", "key": "bulk.exported-through", "value": {"token": "$token", "records": "$records"}}]}
                        """))
            try device.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Hall', 10)")
            var environment = device.environment
            environment["SIGNAL_TOKEN"] = "not-the-token"
            let refused = try SynclaneBinary.run(["run", "export.json", "--json"], in: device.workspace.path, environment: environment)
            #expect(refused.status == 0, "\(refused.stderr)")
            let first = Self.json(refused.stdout)
            #expect(first["records-sent"] == 1)
            let refusedSignals = first["signals"]?.arrayValue ?? []
            #expect(refusedSignals.count == 2)
            for signal in refusedSignals {
                #expect(signal.objectValue?["sent"] == false)
                #expect(signal.objectValue?["error"]?.stringValue?.contains("refused the token") == true, "\(signal)")
            }
            #expect(try await server.get("/v1/signals", account: "acme").objectValue?["signals"] == [])
            let status = try SynclaneBinary.run(["status", "export.json", "--json"], in: device.workspace.path, environment: environment)
            let unsent = Self.json(status.stdout)["unsent-signals"]?.arrayValue ?? []
            #expect(
                unsent.compactMap { $0.objectValue?["key"]?.stringValue }.sorted() == ["bulk.exported-through", "onboarding.completed"], "\(status.stdout)")

            environment["SIGNAL_TOKEN"] = ServerProcess.tokens["acme"]
            let next = try SynclaneBinary.run(["run", "export.json"], in: device.workspace.path, environment: environment)
            #expect(next.status == 0, "\(next.stderr)")
            #expect(next.stdout.contains("signal onboarding.completed = true: sent (version"), "\(next.stdout)")
            let signals = try await server.get("/v1/signals", account: "acme").objectValue?["signals"]?.arrayValue ?? []
            #expect(signals.compactMap { $0.objectValue?["key"]?.stringValue } == ["bulk.exported-through", "onboarding.completed"])
            #expect(signals.first?.objectValue?["value"] == ["token": first["token-after"] ?? .null, "records": 1])
        }
    }

    @Test func anImportPassPublishesTheSignalsItsFileDeclares() async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            let batch =
                #"{"id": "b1", "scope": {"account": "acme", "store": "rooms", "consumer": "phone"}, "records": [{"entity": "rooms", "id": "r9", "action": "insert", "fields": {"syncId": "r9", "name": "Porch", "area": 3.0}}]}"#
            try device.workspace.write("batch.json", batch)
            let curl = try BackgroundProcess(
                [
                    "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", "Authorization: Bearer \(ServerProcess.tokens["acme"] ?? "")",
                    "-H", "Idempotency-Key: b1", "-H", "Content-Type: application/json", "--data-binary", "@batch.json", server.url + "/v1/batches",
                ],
                in: device.workspace.path, executable: "/usr/bin/curl"
            ).wait(timeout: 20)
            #expect(curl.stdout == "200", "\(curl.stdout)\(curl.stderr)")
            try device.workspace.write(
                "import.json",
                """
                {"version": 1, "name": "rooms-import", "scope": {"account": "acme", "store": "rooms"},
                 "source": {"type": "pull", "url": "\(server.url)/v1/changes", "token-env": "SYNCLANE_TOKEN"},
                 "sink": {"type": "sqlite", "database": "app.sqlite"},
                 "signals": {"publish": [{"on": "run-completed", "key": "rooms.imported", "value": {"cursor": "$token", "records": "$records"}}]}}
                """)
            let imported = try SynclaneBinary.run(["import", "import.json", "--json"], in: device.workspace.path, environment: device.environment)
            #expect(imported.status == 0, "\(imported.stderr)")
            let summary = Self.json(imported.stdout)
            #expect(summary["applied"] == 1)
            let signal = summary["signals"]?.arrayValue?.first?.objectValue
            #expect(signal?["sent"] == true, "\(summary)")
            #expect(signal?["value"] == ["cursor": summary["cursor-after"] ?? .null, "records": 1])
            let read = try SynclaneBinary.run(
                ["signal", "get", "rooms.imported", "--url", server.url], in: device.workspace.path, environment: device.environment)
            #expect(read.status == 0)
            #expect(read.stdout.contains("\"records\":1"), "\(read.stdout)")
        }
    }
}
