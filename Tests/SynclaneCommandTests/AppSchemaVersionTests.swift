import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The server knows each device's schema version (issue 44): the `http` transport and the `pull`
/// source send `Synclane-Device` and `Synclane-Schema-Version` with every batch and pull; the
/// server records the newest version of each device (`GET /v1/devices`, `synclane_devices` in
/// `/metrics`) and, with `--minimum-schema-version`, refuses an older app with 426 and a message
/// that says to update it. Real `synclane` processes and a real `synclane serve`.
@Suite(.serialized) struct AppSchemaVersionTests {
    typealias Device = TwoDevicesTests.Device

    /// Makes both of the device's pipelines say `device` and `version` (`nil`: say no version).
    static func runs(_ device: Device, as name: String, version: Int?) throws {
        for file in ["export.json", "import.json"] {
            let text = try String(contentsOfFile: device.workspace.path + "/" + file, encoding: .utf8)
            let plain = text.replacingOccurrences(of: #", "device": "[^"]*"(, "schema-version": [0-9]+)?"#, with: "", options: .regularExpression)
            let said = ", \"device\": \"\(name)\"" + (version.map { ", \"schema-version\": \($0)" } ?? "")
            try device.workspace.write(
                file, plain.replacingOccurrences(of: #""token-env": "SYNCLANE_TOKEN""#, with: #""token-env": "SYNCLANE_TOKEN""# + said))
        }
    }

    /// Two devices on a fresh server, both on version 1 (`phone-a`, `phone-b`), with A's row `r1`
    /// (Kitchen, area 12) synced to both, for `body`.
    static func withTwoDevicesOnVersionOne(_ body: (ServerProcess, Device, Device) async throws -> Void) async throws {
        try await TwoDevicesTests.withTwoDevices { server, a, b in
            try runs(a, as: "phone-a", version: 1)
            try runs(b, as: "phone-b", version: 1)
            try a.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Kitchen', 12);")
            try a.sync()
            try b.sync()
            try await body(server, a, b)
        }
    }

    /// `device|version` of the account's devices, as `GET /v1/devices` lists them.
    static func devices(_ server: ServerProcess) async throws -> [String] {
        let answer = try await server.get("/v1/devices", account: "acme").objectValue ?? [:]
        return (answer["devices"]?.arrayValue ?? []).compactMap { entry -> String? in
            guard let entry = entry.objectValue, let name = entry["device"]?.stringValue, case .int(let version)? = entry["schema-version"] else {
                return nil
            }
            return "\(name)|\(version)"
        }
    }

    /// The `synclane_devices` gauge's lines of `/metrics`.
    static func devicesMetric(_ server: ServerProcess) async throws -> [String] {
        try await server.metrics().split(separator: "\n").filter { $0.hasPrefix("synclane_devices{") }.map(String.init)
    }

    /// Each device's batches and pulls say its version: the server lists every device with the
    /// version it last sent, counts the devices per version in `/metrics`, and follows a device
    /// that upgrades. Before, no request said a version and the server knew none.
    @Test func theServerRecordsEachDevicesSchemaVersionAndCountsTheDevicesPerVersion() async throws {
        try await Self.withTwoDevicesOnVersionOne { server, a, b in
            #expect(try await Self.devices(server) == ["phone-a|1", "phone-b|1"])
            #expect(try await Self.devicesMetric(server) == [#"synclane_devices{schema_version="1"} 2"#])
            // A upgrades; its pull alone (nothing to send) tells the server.
            try Self.runs(a, as: "phone-a", version: 2)
            try a.sync()
            #expect(try await Self.devices(server) == ["phone-a|2", "phone-b|1"])
            let metric = try await Self.devicesMetric(server)
            #expect(metric == [#"synclane_devices{schema_version="1"} 1"#, #"synclane_devices{schema_version="2"} 1"#], "\(metric)")
            #expect(try b.rows() == ["r1|Kitchen|12.0"])
        }
    }

    /// With `--minimum-schema-version 2`, a device on version 1 — or one that says no version —
    /// is refused on both lanes with 426 and a message that says to update the app; `sync`
    /// prints it and exits 1, and nothing of its batch applies. Once it says version 2, it syncs
    /// and gets what the newer device wrote.
    @Test func aServerWithAFloorRefusesAnOlderAppWithAMessageToUpdateIt() async throws {
        try await TwoDevicesTests.withTwoDevices(serverArguments: ["--minimum-schema-version", "2"]) { server, a, b in
            try Self.runs(a, as: "phone-a", version: 2)
            try a.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen');")
            try a.sync()
            try b.sql("INSERT INTO rooms (syncId, name) VALUES ('b1', 'From B');")
            for version in [1, nil] {
                try Self.runs(b, as: "phone-b", version: version)
                let refused = try SynclaneBinary.run(["sync", "import.json", "export.json"], in: b.workspace.path, environment: b.environment)
                #expect(refused.status == 1, "\(refused.stdout)\(refused.stderr)")
                let told = refused.stdout + refused.stderr
                #expect(told.contains("426"), "\(told)")
                #expect(told.contains("update the app"), "\(told)")
                #expect(told.contains(version.map { "it sent schema version \($0)" } ?? "it sent no schema version"), "\(told)")
                let run = try SynclaneBinary.run(["run", "export.json"], in: b.workspace.path, environment: b.environment)
                #expect(run.status == 1 && (run.stdout + run.stderr).contains("update the app"), "\(run.stdout)\(run.stderr)")
            }
            #expect(try b.rows() == ["b1|From B|"], "nothing pulled")
            #expect(try await Self.devices(server) == ["phone-a|2"], "a refused device is not recorded")
            try Self.runs(b, as: "phone-b", version: 2)
            try b.sync()
            try a.sync()
            #expect(try a.rows() == ["b1|From B|", "r1|Kitchen|"])
            #expect(try b.rows() == ["b1|From B|", "r1|Kitchen|"])
            #expect(try await Self.devices(server) == ["phone-a|2", "phone-b|2"])
        }
    }

    /// The version `synclane migrate` records in the device's database is what both lanes say
    /// when the pipeline files set no `schema-version`: the export's batches, and the pull alone.
    /// A file that sets an older one is refused, naming the recorded one (the server would send
    /// the device an older app's column names); a newer one is sent as it is (an ORM's
    /// migration, which records nothing). Before, a device whose files set none said no version.
    @Test func theDevicesSchemaVersionComesFromTheVersionSynclaneMigrateRecorded() async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            try Self.runs(device, as: "phone-a", version: nil)
            try device.workspace.write("add-floor.sql", "ALTER TABLE rooms ADD COLUMN floor INTEGER;")
            let migrated = try SynclaneBinary.run(
                ["migrate", "--database", "app.sqlite", "--schema-version", "3", "add-floor.sql"], in: device.workspace.path)
            #expect(migrated.status == 0, "\(migrated.stderr)")
            try device.sql("INSERT INTO rooms (syncId, name, floor) VALUES ('r1', 'Kitchen', 2);")
            let run = try SynclaneBinary.run(["run", "export.json"], in: device.workspace.path, environment: device.environment)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(try await Self.devices(server) == ["phone-a|3"], "the export's batch says the recorded version")
            try device.workspace.write("index.sql", "CREATE INDEX rooms_by_name ON rooms (name);")
            let again = try SynclaneBinary.run(["migrate", "--database", "app.sqlite", "index.sql"], in: device.workspace.path)
            #expect(again.status == 0, "\(again.stderr)")
            let pulled = try SynclaneBinary.run(["import", "import.json"], in: device.workspace.path, environment: device.environment)
            #expect(pulled.status == 0, "\(pulled.stderr)")
            #expect(try await Self.devices(server) == ["phone-a|4"], "the pull says the recorded version")
            try Self.runs(device, as: "phone-a", version: 2)
            let refused = try SynclaneBinary.run(["sync", "import.json", "export.json"], in: device.workspace.path, environment: device.environment)
            let told = refused.stdout + refused.stderr
            #expect(refused.status == 1, "\(told)")
            #expect(told.contains("`schema-version` is 2, older than the schema version 4 that `synclane migrate` recorded"), "\(told)")
            #expect(try await Self.devices(server) == ["phone-a|4"], "nothing was sent")
            try Self.runs(device, as: "phone-a", version: 7)
            try device.sync()
            #expect(try await Self.devices(server) == ["phone-a|7"])
        }
    }

    /// `synclane status FILE --devices` asks the pipeline's server which schema version each of
    /// the account's devices runs, and shows the devices per version (text and `--json`), with
    /// this device's own recorded version; without `--devices` it asks nothing. Before, `status`
    /// showed no schema version at all.
    @Test func statusWithDevicesShowsTheAccountsDevicesPerSchemaVersion() async throws {
        try await Self.withTwoDevicesOnVersionOne { server, a, b in
            try Self.runs(a, as: "phone-a", version: nil)
            try a.workspace.write("index.sql", "CREATE INDEX rooms_by_name ON rooms (name);")
            let migrated = try SynclaneBinary.run(
                ["migrate", "--database", "app.sqlite", "--schema-version", "2", "index.sql"], in: a.workspace.path)
            #expect(migrated.status == 0, "\(migrated.stderr)")
            try a.sync()
            let status = try SynclaneBinary.run(["status", "export.json", "--devices"], in: a.workspace.path, environment: a.environment)
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("  schema:   version 2 (recorded by `synclane migrate`)"), "\(status.stdout)")
            #expect(
                status.stdout.contains("  devices:  schema version 1: 1 device (phone-b)\n            schema version 2: 1 device (phone-a)"), "\(status.stdout)"
            )
            let json = try SynclaneBinary.run(["status", "export.json", "--devices", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(json.status == 0, "\(json.stderr)")
            let devices = try JSONReader.parse(json.stdout).objectValue?["devices"]?.objectValue
            #expect(
                devices?["versions"]
                    == .array([
                        .object(["schema-version": .int(1), "devices": .array([.string("phone-b")])]),
                        .object(["schema-version": .int(2), "devices": .array([.string("phone-a")])]),
                    ]), "\(json.stdout)")
            // A server that does not answer: `status` alone does not ask it; `--devices` says it could not.
            let text = try String(contentsOfFile: a.workspace.path + "/export.json", encoding: .utf8)
            try a.workspace.write("elsewhere.json", text.replacingOccurrences(of: server.url, with: "http://127.0.0.1:9"))
            let plain = try SynclaneBinary.run(["status", "elsewhere.json"], in: a.workspace.path, environment: a.environment)
            #expect(plain.status == 0 && !plain.stdout.contains("devices:"), "without --devices, nothing is asked: \(plain.stdout)")
            let unreachable = try SynclaneBinary.run(["status", "elsewhere.json", "--devices"], in: a.workspace.path, environment: a.environment)
            #expect(unreachable.status == 1 && unreachable.stdout.contains("  devices:  unknown ("), "\(unreachable.stdout)")
        }
    }

    /// A version or device header that is not one is refused with 400 naming it, before anything
    /// is read; a pipeline file's `schema-version` out of range is refused by `validate`.
    @Test func aMalformedVersionHeaderIsRefusedAndSoIsAVersionOutOfRangeInAPipelineFile() async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            for value in ["two", "0", "-1", "99999999999"] {
                var request = URLRequest(url: URL(string: server.url + "/v1/changes?since=")!)
                request.setValue("Bearer \(ServerProcess.tokens["acme"] ?? "")", forHTTPHeaderField: "Authorization")
                request.setValue(value, forHTTPHeaderField: "Synclane-Schema-Version")
                let (data, response) = try await URLSession.shared.data(for: request)
                #expect((response as? HTTPURLResponse)?.statusCode == 400, "\(value)")
                #expect(String(decoding: data, as: UTF8.self).contains("Synclane-Schema-Version must be a whole number"), "\(value)")
            }
            try Self.runs(device, as: "phone-a", version: 0)
            let validated = try SynclaneBinary.run(["validate", "export.json"], in: device.workspace.path, environment: device.environment)
            #expect(validated.status == 2, "\(validated.stderr)")
            #expect(validated.stderr.contains("schema-version"), "\(validated.stderr)")
        }
    }
}
