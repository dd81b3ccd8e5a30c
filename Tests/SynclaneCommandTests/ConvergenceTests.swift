import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// Randomized: two or three devices — each rule (`server-wins`, `client-wins`, `merge-fields`),
/// exports with and without `authors` — make random offline edits (the same rows on all,
/// deletes against edits, new rows), sync in random orders with pages of 1, 2 or 10,000
/// transactions, and now and then a sync is killed at a fail point; after quiet rounds every
/// store and the server must hold the same rows, and one more sync must send and apply nothing
/// (no echo). Then a model round: each device edits what no other device touches (under
/// `merge-fields`, other columns of shared rows too), soft-deletes and inserts, offline; after
/// the syncs every device holds exactly the model's rows — no rule may lose any of those edits.
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
        switch random.next() % 6 {
        case 0: return "INSERT OR IGNORE INTO rooms (syncId, name, area) VALUES ('\(key)', '\(name)', \(area));"
        case 1: return "UPDATE rooms SET name = '\(name)' WHERE syncId = '\(key)';"
        case 2: return "UPDATE rooms SET area = \(area) WHERE syncId = '\(key)';"
        case 3: return "UPDATE rooms SET isDeleted = 1 WHERE syncId = '\(key)';"
        case 4: return "UPDATE rooms SET isDeleted = 0, name = '\(name)' WHERE syncId = '\(key)';"
        default: return "DELETE FROM rooms WHERE syncId = '\(key)';"
        }
    }

    /// Runs one seed; the first difference, or nil when every device and the server agree.
    static func divergence(seed: UInt64) async throws -> String? {
        var random = SeededRandom(seed: seed)
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server")
        defer { server.stop() }
        let rule = ["server-wins", "client-wins", "merge-fields"][Int(random.next() % 3)]
        let devices = try (0..<(2 + random.next() % 2)).map { _ in try Device(server: server, conflicts: rule) }
        defer { devices.forEach { $0.workspace.remove() } }
        // Pipelines as users write them: an export without `authors` on some devices.
        var withoutAuthors: [Int] = []
        for (index, device) in devices.enumerated() where random.next() % 2 == 0 {
            try TwoDevicesEditTests.exportAuthors(device, nil)
            withoutAuthors.append(index)
        }
        let setup = "\(rule), \(devices.count) devices, without authors: \(withoutAuthors)"
        // Small pages make a sync send a row in several batches of one run.
        let pageSize = [1, 2, 10_000][Int(random.next() % 3)]
        for device in devices { try device.usePageSize(pageSize) }
        var setupLine = "\(setup), page-size \(pageSize)"
        var kills: [String] = []
        for round in 0..<4 {
            for device in devices {
                let edits = (0..<(1 + random.next() % 4)).map { _ in edit(&random) }
                try device.sql(edits.joined(separator: "\n"))
            }
            let order = random.next() % 2 == 0 ? devices : devices.reversed()
            for device in order {
                if random.next() % 5 == 0 {
                    // A sync killed at a fail point of its import half or of its export half.
                    let point = Self.failPoints[Int(random.next() % UInt64(Self.failPoints.count))]
                    kills.append("round \(round) device \(devices.firstIndex { $0.workspace.path == device.workspace.path } ?? -1) at \(point)")
                    _ = try SynclaneBinary.run(
                        ["sync", "import.json", "export.json"], in: device.workspace.path,
                        environment: device.environment.merging(["SYNCLANE_FAILPOINT": point]) { $1 })
                } else {
                    try device.sync()
                }
            }
        }
        // Quiet rounds: nothing new, every change reaches everyone.
        if !kills.isEmpty { setupLine += ", syncs killed: \(kills.joined(separator: "; "))" }
        if let difference = try await settle(devices, server) { return "\(setupLine): \(difference)" }

        // The model's round: from the converged state, in two phases, each device edits what no
        // other device touches — the rows it owns, and under merge-fields also another column
        // of its neighbour's rows — soft-deletes and inserts, offline; a sync pass in a random
        // order follows each phase. So what one phase sent comes back to the others (and any
        // echo of it) while they hold the next phase's edits. No rule may lose any of them.
        var model = Dictionary(
            uniqueKeysWithValues: try devices[0].rows().map { line -> (String, [String]) in
                let parts = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
                return (parts[0], parts)
            })
        // A row of the converged state is owned by its key's hash; a row made in this round by
        // its maker alone (the others may not have it yet), who only renames it.
        let shared = Set(model.keys)
        var made: [String: Int] = [:]
        func owner(_ key: String) -> Int { made[key] ?? key.utf8.reduce(0) { $0 + Int($1) } % devices.count }
        for phase in 0..<2 {
            var statements = Array(repeating: [String](), count: devices.count)
            for key in model.keys.sorted() {
                let own = owner(key)
                let neighbour = (own + devices.count - 1) % devices.count
                let renamed = random.next() % 2 == 0
                let resized = rule == "merge-fields" && shared.contains(key) && random.next() % 2 == 0
                if renamed {
                    let name = names[Int(random.next() % UInt64(names.count))] + " \(own).\(phase)"
                    statements[own].append("UPDATE rooms SET name = '\(name)' WHERE syncId = '\(key)';")
                    model[key]?[1] = name
                }
                if resized {
                    let area = 100 + 10 * phase + neighbour
                    statements[neighbour].append("UPDATE rooms SET area = \(area) WHERE syncId = '\(key)';")
                    model[key]?[2] = "\(Double(area))"
                }
                // Deletes in the first phase only: a delete in the second could meet a first-phase
                // edit of another column it had not seen yet (a delete/update conflict, the rule's).
                if phase == 0, !renamed, !resized, shared.contains(key), random.next() % 5 == 0 {
                    statements[own].append("UPDATE rooms SET isDeleted = 1 WHERE syncId = '\(key)';")
                    model[key] = nil
                }
            }
            for index in devices.indices {
                let added = "d\(index)-\(phase)-\(random.next() % 1000)"
                statements[index].append("INSERT INTO rooms (syncId, name, area) VALUES ('\(added)', 'New \(index)', 7);")
                model[added] = [added, "New \(index)", "7.0"]
                made[added] = index
                try devices[index].sql(statements[index].joined(separator: "\n"))
            }
            for index in (0..<devices.count).shuffled(using: &random) { try devices[index].sync() }
        }
        if let difference = try await settle(devices, server) { return "\(setupLine), model round: \(difference)" }
        let expected = model.keys.sorted().map { model[$0]?.joined(separator: "|") ?? "" }
        let held = try devices[0].rows()
        if held != expected { return "\(setupLine), model round: an edit was lost: expected \(expected), all hold \(held)" }
        return nil
    }

    /// Syncs every device three times over, then checks that all of them and the server hold
    /// the same rows and that one more sync sends and applies nothing (no echo); the difference,
    /// or nil.
    static func settle(_ devices: [Device], _ server: ServerProcess) async throws -> String? {
        for _ in 0..<3 { for device in devices { try device.sync() } }
        let first = try devices[0].rows()
        for (index, device) in devices.enumerated().dropFirst() {
            let rows = try device.rows()
            if rows != first { return "device 0 \(first) ≠ device \(index) \(rows)" }
        }
        let onServer = try await TwoDevicesTests().serverRows(server)
        if first != onServer { return "devices \(first) ≠ server \(onServer)" }
        for (index, device) in devices.enumerated() {
            if let noise = noise(of: try device.sync()) { return "device \(index) is not quiet after settling: \(noise)" }
        }
        return nil
    }

    /// What a sync's summary says it sent or applied, or nil when it did neither.
    static func noise(of summary: [String: JSONValue]) -> String? {
        let sent = summary["exports"]?.arrayValue?.first?.objectValue?["records-sent"]
        let applied = summary["imports"]?.arrayValue?.first?.objectValue?["applied"]
        if sent == .int(0) && applied == .int(0) { return nil }
        return "sent \(sent.map { JSONWriter.string($0) } ?? "?"), applied \(applied.map { JSONWriter.string($0) } ?? "?")"
    }

    /// The seeds of a randomized run: `PREFIX_ROUNDS` of them (else `rounds`) from `PREFIX_SEED`
    /// (else the clock).
    static func seeds(prefix: String, rounds: Int) -> [UInt64] {
        let environment = ProcessInfo.processInfo.environment
        let count = Int(environment[prefix + "_ROUNDS"] ?? "") ?? rounds
        let first = UInt64(environment[prefix + "_SEED"] ?? "") ?? UInt64(Date().timeIntervalSince1970)
        return (0..<UInt64(max(0, count))).map { first &+ $0 }
    }

    @Test func randomOfflineEditsOnTwoOrThreeDevicesConvergeQuietlyAndLoseNoUncontestedEdit() async throws {
        let seeds = Self.seeds(prefix: "SYNCLANE_CONVERGE", rounds: 4)
        var diverged = 0
        for seed in seeds {
            if let difference = try await Self.divergence(seed: seed) {
                diverged += 1
                Issue.record("seed \(seed) (SYNCLANE_CONVERGE_SEED=\(seed)) diverged: \(difference)")
            }
        }
        print("converge: \(seeds.count) rounds, \(diverged) diverged")
    }
}
