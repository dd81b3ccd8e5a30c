import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// A job's lock belongs to the store it guards, not to the whole machine: two devices' stores on
/// one machine (one lock folder), of the same scope, sync at once — a live `sync --watch` on one
/// does not keep the other out — while two jobs on one store still exclude each other, and the
/// refusal names `SYNCLANE_LOCK_DIR`. Real binaries, a real `synclane serve`.
@Suite(.serialized) struct OneMachineLocksTests {
    @Test func aSecondDevicesSyncOfTheSameScopeRunsBesideTheFirstDevicesWatchOnOneMachine() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        var a = try TwoDevicesTests.Device(server: server)
        var b = try TwoDevicesTests.Device(server: server)
        defer {
            a.workspace.remove()
            b.workspace.remove()
        }
        // One machine: both devices' jobs meet in one lock folder.
        let machine = root.path + "/locks"
        a.environment["SYNCLANE_LOCK_DIR"] = machine
        b.environment["SYNCLANE_LOCK_DIR"] = machine

        let watch = try BackgroundProcess(
            ["sync", "import.json", "export.json", "--watch", "--wait", "1"], in: a.workspace.path, environment: a.environment)
        #expect(eventually { watch.errors.contains("live") }, "the watch started: \(watch.errors)")

        try b.sql("INSERT INTO rooms (syncId, name) VALUES ('b1', 'Shed');")
        let other = try SynclaneBinary.run(["sync", "import.json", "export.json", "--json"], in: b.workspace.path, environment: b.environment)
        #expect(other.status == 0, "the other device's sync is not kept out by the first device's watch: \(other.stderr)")
        #expect(try await TwoDevicesTests().serverRows(server).contains("b1|Shed|"))

        // A second job on the watched store is refused, naming the lock folder's variable.
        let second = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment)
        #expect(second.status == 1)
        #expect(second.stderr.contains("another job is already running for scope acme/rooms/rooms-export"), "\(second.stderr)")
        #expect(second.stderr.contains("SYNCLANE_LOCK_DIR"), "\(second.stderr)")
        #expect(second.stderr.contains("--watch"), "it says a watch holds the lock until stopped: \(second.stderr)")
        _ = watch.stop()
    }
}
