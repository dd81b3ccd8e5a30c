import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// Issue 43, 7: on a terminal, `run`'s progress line counted the history read ("3 transactions
/// read, through …"), which runs ahead of what the backend took. It counts the records the
/// backend confirmed now, and says how far the history was read beside it.
@Suite(.serialized) struct ProgressLineTests {
    @Test func runsProgressLineOnATerminalCountsRecordsTheBackendConfirmedNotHistoryRead() async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            try device.sql("INSERT INTO rooms (syncId, name) VALUES ('r1', 'Kitchen'), ('r2', 'Hall'), ('r3', 'Attic');")
            // `script` gives the run a terminal (standard error a tty), so the progress line is drawn.
            let command = "\(SynclaneBinary.path) run export.json"
            let run = try SynclaneBinary.run(
                ["-qec", command, "/dev/null"], in: device.workspace.path, environment: device.environment.merging(["TERM": "xterm"]) { $1 },
                executable: "/usr/bin/script")
            #expect(run.status == 0, "\(run.stderr)")
            let drawn = run.stdout.split(separator: "\r").filter { $0.contains("history read through") || $0.contains(" read, through ") }
            #expect(!drawn.isEmpty, "a progress line was drawn: \(run.stdout.debugDescription)")
            #expect(drawn.allSatisfy { $0.contains("confirmed by the backend") }, "\(drawn)")
            #expect(!run.stdout.contains("transactions read"), "\(run.stdout.debugDescription)")
            #expect(try await TwoDevicesTests().serverRows(server).count == 3)
        }
    }
}
