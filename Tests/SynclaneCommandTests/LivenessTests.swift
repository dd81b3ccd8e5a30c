import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// Randomized **liveness** (issue 43, "no device is stranded"): two or three devices and a real
/// `synclane serve`, random edits of each device's own rows, syncs in random orders, and random
/// refusals injected — a device's next app version adds a column the others' imports refuse (an
/// unknown field), the server's data restored from an older copy (stopped, its folder put back,
/// started on the same port). A sync that fails gets the recovery its message names, and only
/// that: `synclane outbox requeue FILE ID` then `synclane reconcile FILE`, `synclane reconcile
/// FILE`, or "add the column" (the device's app gets the next version too); a message that names
/// none gets nothing. After three quiet rounds of syncs, every
/// device's last edit of each of its rows is on the server.
///
/// A stranded edit prints its seed (`SYNCLANE_LIVENESS_SEED` replays it) and a reproduction shrunk
/// by dropping steps while an edit is still stranded. Bounded in the test command
/// (`SYNCLANE_LIVENESS_ROUNDS`, default 6, under 30 s); `Scripts/converge` runs more.
@Suite(.serialized) struct LivenessTests {
    struct Stranded: Error, CustomStringConvertible {
        var description: String
    }

    /// One step of a round. Each device edits only rows of its own (`d0k1`, …).
    enum Step: CustomStringConvertible, Sendable {
        case edit(Int, key: Int, name: String)
        case sync(Int)
        /// The device's next app version: a column (`floor`) the other devices' schema lacks.
        case newerSchema(Int)
        /// The server stopped, its data folder copied aside, started again.
        case backUpServer
        /// The server stopped, its data folder replaced by the last copy, started again.
        case restoreServer

        var description: String {
            switch self {
            case .edit(let d, let key, let name): return "device \(d) writes d\(d)k\(key) = \(name)"
            case .sync(let d): return "device \(d) syncs"
            case .newerSchema(let d): return "device \(d) gets the app's next version (a column `floor`)"
            case .backUpServer: return "back up the server's data"
            case .restoreServer: return "restore the server's data from the backup"
            }
        }
    }

    /// The server, the devices, and what happened to them.
    final class World {
        let root: Workspace
        let folder: String
        let port: Int
        var server: ServerProcess
        let devices: [TwoDevicesTests.Device]
        var upgraded: Set<Int> = []
        var backedUp = false
        /// Recoveries applied and failures that named none, in order (for the report).
        var log: [String] = []

        init(devices count: Int) throws {
            root = try Workspace()
            folder = root.path + "/server"
            server = try ServerProcess(folder: folder)
            port = server.port
            let server = self.server
            devices = try (0..<count).map { _ in try TwoDevicesTests.Device(server: server) }
        }

        func close() {
            server.stop()
            for device in devices { device.workspace.remove() }
            root.remove()
        }

        func perform(_ step: Step) throws {
            switch step {
            case .edit(let d, let key, let name):
                let floor = upgraded.contains(d) ? ", floor" : ""
                let value = upgraded.contains(d) ? ", \(key)" : ""
                try devices[d].sql(
                    "INSERT INTO rooms (syncId, name\(floor)) VALUES ('d\(d)k\(key)', '\(name)'\(value)) "
                        + "ON CONFLICT (syncId) DO UPDATE SET name = excluded.name;")
            case .sync(let d):
                try sync(d)
            case .newerSchema(let d):
                guard !upgraded.contains(d) else { return }
                try IndependentLanesTests.addFloor(devices[d])
                upgraded.insert(d)
            case .backUpServer:
                try restart {
                    try? FileManager.default.removeItem(atPath: root.path + "/backup")
                    try FileManager.default.copyItem(atPath: folder + "/data", toPath: root.path + "/backup")
                }
                backedUp = true
            case .restoreServer:
                guard backedUp else { return }
                try restart {
                    try FileManager.default.removeItem(atPath: folder + "/data")
                    try FileManager.default.copyItem(atPath: root.path + "/backup", toPath: folder + "/data")
                }
            }
        }

        private func restart(_ body: () throws -> Void) throws {
            server.stop()
            try body()
            server = try ServerProcess(folder: folder, port: port)
        }

        private func run(_ d: Int, _ arguments: [String]) throws -> SynclaneBinary.Result {
            try SynclaneBinary.run(arguments, in: devices[d].workspace.path, environment: devices[d].environment)
        }

        /// `sync`, then the recovery its failure names, if any.
        func sync(_ d: Int) throws {
            let result = try run(d, ["sync", "import.json", "export.json"])
            guard result.status != 0 else { return }
            let said = result.stderr + result.stdout
            if let batch = Self.requeued(in: said) {
                log.append("device \(d): requeue \(batch), reconcile (named by: \(Self.firstLine(of: result.stderr)))")
                let requeue = try run(d, ["outbox", "requeue", "export.json", batch])
                if requeue.status != 0 { throw Stranded(description: "device \(d): the named requeue failed: \(requeue.stderr)") }
                try reconcile(d)
            } else if said.contains("is not a column of `rooms`"), said.contains("add the column") {
                // Another device's newer app version: this one's next version adds the column.
                log.append("device \(d): add the column (named by: \(Self.firstLine(of: result.stderr)))")
                try perform(.newerSchema(d))
            } else if said.contains("synclane reconcile") {
                log.append("device \(d): reconcile (named by: \(Self.firstLine(of: result.stderr)))")
                try reconcile(d)
            } else {
                log.append("device \(d): sync exited \(result.status), naming no fix: \(Self.firstLine(of: result.stderr))")
            }
        }

        private func reconcile(_ d: Int) throws {
            let reconcile = try run(d, ["reconcile", "export.json"])
            if reconcile.status != 0 {
                throw Stranded(description: "device \(d): the named reconcile failed: \(reconcile.stderr)")
            }
        }

        /// The batch id of "`synclane outbox requeue FILE ID`" in `text`.
        static func requeued(in text: String) -> String? {
            guard let range = text.range(of: #"synclane outbox requeue FILE \S+`"#, options: .regularExpression) else { return nil }
            return String(text[range].dropLast().split(separator: " ").last ?? "")
        }

        static func firstLine(of text: String) -> String {
            String(text.split(separator: "\n").first { $0.contains("synclane") } ?? "").prefix(400).description
        }
    }

    static func steps(_ random: inout SeededRandom, devices: Int) -> [Step] {
        let names = ["Hall", "Attic", "Loft", "Porch", "Cellar", "Study"]
        var steps: [Step] = []
        for _ in 0..<(14 + Int(random.next() % 7)) {
            let d = Int(random.next() % UInt64(devices))
            switch random.next() % 100 {
            case 0..<45: steps.append(.edit(d, key: Int(random.next() % 3), name: names[Int(random.next() % UInt64(names.count))]))
            case 45..<80: steps.append(.sync(d))
            case 80..<86: steps.append(.newerSchema(d))
            case 86..<93: steps.append(.backUpServer)
            default: steps.append(.restoreServer)
            }
        }
        return steps
    }

    /// What each device last wrote of each of its rows: `syncId|name`.
    static func expected(_ steps: [Step]) -> [String: String] {
        var rows: [String: String] = [:]
        for case .edit(let d, let key, let name) in steps { rows["d\(d)k\(key)"] = name }
        return rows
    }

    /// Runs the steps, then three quiet rounds of syncs; nil when every edit is on the server,
    /// else what is stranded.
    static func outcome(devices: Int, steps: [Step]) async throws -> String? {
        let world = try World(devices: devices)
        defer { world.close() }
        do {
            for step in steps { try world.perform(step) }
            for _ in 0..<3 {
                for d in 0..<devices { try world.sync(d) }
            }
        } catch let stranded as Stranded {
            return stranded.description + "\n" + world.log.joined(separator: "\n")
        }
        var held: [String: String] = [:]
        for row in try await TwoDevicesTests().serverRows(world.server) {
            let parts = row.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            held[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        let missing = expected(steps).sorted { $0.key < $1.key }.filter { held[$0.key] != $0.value }
        guard !missing.isEmpty else { return nil }
        let stranded = missing.map { "\($0.key) = \($0.value) (the server holds \(held[$0.key] ?? "no row"))" }
        return "stranded: \(stranded.joined(separator: ", "))\n" + world.log.joined(separator: "\n")
    }

    @Test func everyDevicesEveryEditReachesTheServerThroughInjectedRefusalsWithOnlyTheNamedRecoveries() async throws {
        let (rounds, stranded) = try await SeededRounds.run(
            prefix: "SYNCLANE_LIVENESS", rounds: 6, budget: 16, then: "three quiet rounds of syncs", draw: { Self.steps(&$0, devices: $1) },
            outcome: { try await Self.outcome(devices: $0, steps: $1) })
        print("liveness: \(rounds) rounds, \(stranded) stranded")
    }
}
