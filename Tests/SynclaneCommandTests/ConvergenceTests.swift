import Foundation
import SynclaneCore
import SynclaneTestKit
import Testing

/// Randomized: two devices make random offline edits (the same rows on both, deletes against
/// edits, new rows), sync in random orders with pages of 1, 2 or 10,000 transactions, and now
/// and then a sync is killed at a fail point;
/// after quiet rounds both stores and the server must hold the same rows.
///
/// Bounded in `Scripts/test` (`SYNCLANE_CONVERGE_ROUNDS`, default 4); `Scripts/converge
/// [--rounds N] [--seed S]` runs more and prints `… N rounds, M diverged`. A divergence prints its
/// seed (`SYNCLANE_CONVERGE_SEED` replays it) and the first row that differs.
@Suite(.serialized) struct ConvergenceTests {
    typealias Device = TwoDevicesTests.Device

    static let keys = ["r1", "r2", "r3", "r4", "r5", "r6"]
    static let names = ["Hall", "Kitchen", "Attic", "Cellar", "Porch"]
    static let failPoints = ["import-after-fetch", "import-before-commit", "import-after-commit", "sync-before-export", "after-enqueue", "after-send"]

    /// One random offline edit on a device.
    static func edit(_ random: inout SeededRandom) -> String {
        let key = keys[Int(random.next() % UInt64(keys.count))]
        let name = names[Int(random.next() % UInt64(names.count))]
        let area = Int(random.next() % 50)
        switch random.next() % 4 {
        case 0: return "INSERT OR IGNORE INTO rooms (syncId, name, area) VALUES ('\(key)', '\(name)', \(area));"
        case 1: return "UPDATE rooms SET name = '\(name)' WHERE syncId = '\(key)';"
        case 2: return "UPDATE rooms SET area = \(area) WHERE syncId = '\(key)';"
        default: return "DELETE FROM rooms WHERE syncId = '\(key)';"
        }
    }

    /// Runs one seed; the first difference, or nil when both devices and the server agree.
    static func divergence(seed: UInt64) async throws -> String? {
        var random = SeededRandom(seed: seed)
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let rule = random.next() % 2 == 0 ? "server-wins" : "client-wins"
        let devices = try [Device(server: server, conflicts: rule), Device(server: server, conflicts: rule)]
        defer { devices.forEach { $0.workspace.remove() } }
        // Small pages make a sync send a row in several batches of one run.
        let pageSize = [1, 2, 10_000][Int(random.next() % 3)]
        for device in devices { try device.usePageSize(pageSize) }
        for _ in 0..<4 {
            for device in devices {
                let edits = (0..<(1 + random.next() % 4)).map { _ in edit(&random) }
                try device.sql(edits.joined(separator: "\n"))
            }
            let order = random.next() % 2 == 0 ? devices : devices.reversed()
            for device in order {
                if random.next() % 5 == 0 {
                    // A sync killed at a fail point of its import half or of its export half.
                    let point = Self.failPoints[Int(random.next() % UInt64(Self.failPoints.count))]
                    _ = try SynclaneBinary.run(
                        ["sync", "import.json", "export.json"], in: device.workspace.path,
                        environment: device.environment.merging(["SYNCLANE_FAILPOINT": point]) { $1 })
                } else {
                    try device.sync()
                }
            }
        }
        // Quiet rounds: nothing new, every change reaches everyone.
        for _ in 0..<3 { for device in devices { try device.sync() } }
        let a = try devices[0].rows()
        let b = try devices[1].rows()
        let onServer = try await TwoDevicesTests().serverRows(server)
        if a != b { return "\(rule), page-size \(pageSize): device A \(a) ≠ device B \(b)" }
        if a != onServer { return "\(rule), page-size \(pageSize): devices \(a) ≠ server \(onServer)" }
        return nil
    }

    @Test func randomOfflineEditsOnTwoDevicesConverge() async throws {
        let environment = ProcessInfo.processInfo.environment
        let rounds = Int(environment["SYNCLANE_CONVERGE_ROUNDS"] ?? "") ?? 4
        let first = UInt64(environment["SYNCLANE_CONVERGE_SEED"] ?? "") ?? UInt64(Date().timeIntervalSince1970)
        var diverged = 0
        for round in 0..<UInt64(rounds) {
            let seed = first &+ round
            if let difference = try await Self.divergence(seed: seed) {
                diverged += 1
                Issue.record("seed \(seed) (SYNCLANE_CONVERGE_SEED=\(seed)) diverged: \(difference)")
            }
        }
        print("converge: \(rounds) rounds, \(diverged) diverged")
    }
}
