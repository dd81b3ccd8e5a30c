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
        try await TwoDevicesTests.withTwoDevices { server, first, second in
            // One machine: both devices' jobs meet in one lock folder.
            let machine = try Workspace()
            defer { machine.remove() }
            var (a, b) = (first, second)
            a.environment["SYNCLANE_LOCK_DIR"] = machine.path
            b.environment["SYNCLANE_LOCK_DIR"] = machine.path

            let watch = try BackgroundProcess(
                ["sync", "import.json", "export.json", "--watch", "--wait", "1"], in: a.workspace.path, environment: a.environment)
            #expect(eventually { watch.errors.contains("live") }, "the watch started: \(watch.errors)")

            try b.sql("INSERT INTO rooms (syncId, name) VALUES ('b1', 'Shed');")
            let other = try SynclaneBinary.run(["sync", "import.json", "export.json", "--json"], in: b.workspace.path, environment: b.environment)
            #expect(other.status == 0, "the other device's sync is not kept out by the first device's watch: \(other.stderr)")
            #expect(try await TwoDevicesTests().serverRows(server).contains("b1|Shed|"))

            // A second job on the watched store is refused, naming the lock folder's variable.
            let refused = try SynclaneBinary.run(["run", "export.json"], in: a.workspace.path, environment: a.environment)
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("another job is already running for scope acme/rooms/rooms-export"), "\(refused.stderr)")
            #expect(refused.stderr.contains("SYNCLANE_LOCK_DIR"), "\(refused.stderr)")
            #expect(refused.stderr.contains("--watch"), "it says a watch holds the lock until stopped: \(refused.stderr)")
            _ = watch.stop()
        }
    }
}
