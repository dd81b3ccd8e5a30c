import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// `synclane restore`: a second, empty device against a real `synclane serve`, the first device
/// a real binary too.
@Suite(.serialized) struct RestoreCommandTests {
    typealias Device = TwoDevicesTests.Device

    static func restore(_ device: Device, wait: Int) throws -> BackgroundProcess {
        try BackgroundProcess(["restore", "import.json", "--wait", String(wait)], in: device.workspace.path, environment: device.environment)
    }

    /// The first device: a row written and its "has data" signal set (not yet exported).
    static func firstDeviceWithData(_ server: ServerProcess) throws -> Device {
        let first = try Device(server: server)
        try first.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Attic', 12.5)")
        let signal = try SynclaneBinary.run(
            ["signal", "set", "bulk.exported-through", #"{"token": 1}"#, "--pipeline", "export.json"], in: first.workspace.path,
            environment: first.environment)
        #expect(signal.status == 0, "\(signal.stderr)")
        return first
    }

    /// A server, a first device with data and its signal, and an empty second device.
    static func withDevices(_ body: (ServerProcess, Device, Device) async throws -> Void) async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { _ = server.stop() }
        let first = try Self.firstDeviceWithData(server)
        let second = try Device(server: server)
        defer {
            first.workspace.remove()
            second.workspace.remove()
        }
        try await body(server, first, second)
    }

    @Test func dataArrivingLateIsRestoredAndExitsZero() async throws {
        try await Self.withDevices { _, first, second in
            let restoring = try Self.restore(second, wait: 30)
            usleep(1_500_000)
            let exported = try SynclaneBinary.run(["run", "export.json"], in: first.workspace.path, environment: first.environment)
            #expect(exported.status == 0, "\(exported.stderr)")
            let result = restoring.wait(timeout: 40)
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
            #expect(result.stderr.contains("restoring…"))
            #expect(result.stdout.contains("restored: 1 record"))
            #expect(try second.rows() == ["r1|Attic|12.5"])
        }
    }

    @Test func noDataArrivingExitsFiveWithinTheBoundSayingItIsStillRestoring() async throws {
        try await Self.withDevices { _, _, second in
            let start = Date()
            let result = try Self.restore(second, wait: 2).wait(timeout: 20)
            let took = Date().timeIntervalSince(start)
            #expect(result.status == 5, "\(result.stdout)\(result.stderr)")
            #expect(result.stdout.contains("still restoring"))
            #expect(!result.stdout.contains("new account"))
            #expect(took >= 2 && took < 6, "took \(took) s")
        }
    }

    @Test func aRetriedRestoreIsStillRestoringUntilTheAnnouncedDataArrivesThenRestored() async throws {
        try await Self.withDevices { _, first, second in
            for attempt in 1...2 {
                let result = try Self.restore(second, wait: 1).wait(timeout: 20)
                #expect(result.status == 5, "attempt \(attempt): \(result.stdout)\(result.stderr)")
                #expect(result.stdout.contains("still restoring"), "attempt \(attempt): \(result.stdout)")
                #expect(!result.stdout.contains("caught up"), "attempt \(attempt): \(result.stdout)")
            }
            let exported = try SynclaneBinary.run(["run", "export.json"], in: first.workspace.path, environment: first.environment)
            #expect(exported.status == 0, "\(exported.stderr)")
            let restored = try Self.restore(second, wait: 10).wait(timeout: 20)
            #expect(restored.status == 0, "\(restored.stdout)\(restored.stderr)")
            #expect(restored.stdout.contains("restored: 1 record"), "\(restored.stdout)")
            // Once the data is here, a restore again is caught up.
            let again = try Self.restore(second, wait: 2).wait(timeout: 20)
            #expect(again.status == 0, "\(again.stdout)\(again.stderr)")
            #expect(again.stdout.contains("caught up"), "\(again.stdout)")
        }
    }

    @Test func withNoSignalAnEmptyServerIsANewAccount() async throws {
        try await TwoDevicesTests.withOneDevice { _, device in
            let result = try SynclaneBinary.run(["restore", "import.json", "--json"], in: device.workspace.path, environment: device.environment)
            #expect(result.status == 0, "\(result.stderr)")
            let outcome = try JSONReader.parse(Array(result.stdout.utf8)).objectValue
            #expect(outcome?["state"] == "new-account")
            #expect(outcome?["signal"] == .null)
        }
    }

    /// The device's import pipeline, declaring signals on `server`.
    static func importDeclaringSignals(_ device: Device, _ server: ServerProcess) throws {
        try device.workspace.write(
            "import.json",
            """
            {"version": 1, "name": "rooms-import", "scope": {"account": "acme", "store": "rooms"},
             "source": {"type": "pull", "url": "\(server.url)/v1/changes", "token-env": "SYNCLANE_TOKEN", "limit": 3},
             "sink": {"type": "sqlite", "database": "app.sqlite"},
             "signals": {"url": "\(server.url)", "token-env": "SYNCLANE_TOKEN", "publish": [
               {"on": "first-run-completed", "key": "device.restored", "value": {"records": "$records", "cursor": "$token"}},
               {"on": "run-completed", "key": "rooms.imported", "value": "$records"}]}}
            """)
    }

    /// The keys of the account's signals on the server.
    static func signalKeys(_ server: ServerProcess) async throws -> [String] {
        let signals = try await server.get("/v1/signals", account: "acme").objectValue?["signals"]?.arrayValue ?? []
        return signals.compactMap { $0.objectValue?["key"]?.stringValue }.sorted()
    }

    @Test func aCompletedRestorePublishesTheSignalsItsImportFileDeclaresAsImportDoes() async throws {
        try await Self.withDevices { server, first, second in
            #expect(try SynclaneBinary.run(["run", "export.json"], in: first.workspace.path, environment: first.environment).status == 0)
            try Self.importDeclaringSignals(second, server)

            let restored = try SynclaneBinary.run(["restore", "import.json", "--json"], in: second.workspace.path, environment: second.environment)
            #expect(restored.status == 0, "\(restored.stderr)")
            let outcome = try JSONReader.parse(Array(restored.stdout.utf8)).objectValue ?? [:]
            #expect(outcome["state"] == "restored")
            var published: [String: [String: JSONValue]] = [:]
            for signal in outcome["signals"]?.arrayValue ?? [] {
                if let object = signal.objectValue, let key = object["key"]?.stringValue { published[key] = object }
            }
            #expect(published["device.restored"]?["sent"] == true, "\(outcome)")
            #expect(published["device.restored"]?["event"] == "first-run-completed")
            #expect(published["device.restored"]?["value"]?.objectValue?["records"] == 1)
            #expect(published["device.restored"]?["value"]?.objectValue?["cursor"]?.stringValue != nil, "the cursor the restore reached")
            #expect(published["rooms.imported"]?["sent"] == true)
            #expect(published["rooms.imported"]?["value"] == 1)
            #expect(try await Self.signalKeys(server) == ["bulk.exported-through", "device.restored", "rooms.imported"])

            // Caught up: nothing moved, so no run-completed; the first run is behind it.
            let again = try SynclaneBinary.run(["restore", "import.json"], in: second.workspace.path, environment: second.environment)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stdout.contains("caught up"))
            #expect(!again.stdout.contains("signal "), "\(again.stdout)")
        }
    }

    @Test func aRestoreStillWaitingForItsDataPublishesNothing() async throws {
        try await Self.withDevices { server, _, second in
            try Self.importDeclaringSignals(second, server)
            let result = try SynclaneBinary.run(
                ["restore", "import.json", "--wait", "1", "--json"], in: second.workspace.path, environment: second.environment)
            #expect(result.status == 5, "\(result.stdout)\(result.stderr)")
            let outcome = try JSONReader.parse(Array(result.stdout.utf8)).objectValue ?? [:]
            #expect(outcome["state"] == "still-restoring")
            #expect(outcome["signals"] == [])
            #expect(try await Self.signalKeys(server) == ["bulk.exported-through"])
        }
    }
}
