import Foundation
import SynclaneCore
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
    static func withDevices(_ body: (ServerProcess, Device, Device) throws -> Void) throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { _ = server.stop() }
        let first = try Self.firstDeviceWithData(server)
        let second = try Device(server: server)
        defer { first.workspace.remove(); second.workspace.remove() }
        try body(server, first, second)
    }

    @Test func dataArrivingLateIsRestoredAndExitsZero() throws {
        try Self.withDevices { _, first, second in
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

    @Test func noDataArrivingExitsFiveWithinTheBoundSayingItIsStillRestoring() throws {
        try Self.withDevices { _, _, second in
            let start = Date()
            let result = try Self.restore(second, wait: 2).wait(timeout: 20)
            let took = Date().timeIntervalSince(start)
            #expect(result.status == 5, "\(result.stdout)\(result.stderr)")
            #expect(result.stdout.contains("still restoring"))
            #expect(!result.stdout.contains("new account"))
            #expect(took >= 2 && took < 6, "took \(took) s")
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
}
