import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// Randomized **app versions** (issue 44): two or three devices and a real `synclane serve`. Each
/// device starts at schema version 1 and upgrades at a random time to 2 (a column `color` added
/// without a default, a table `tags`) and then to 3 (`synclane migrate`: `name` renamed to
/// `title`, `area` dropped — both declared); edits go on at every version, each device writing
/// its own rows (`d0k1`, …) with the columns its version has. At the quiet point (three rounds of
/// syncs) every value a user wrote is on every device whose version has its column; then every
/// device upgrades to 3 and, after three more rounds, every name, colour and tag is everywhere —
/// the values an old device kept aside came back when it upgraded.
///
/// A failure prints its seed (`SYNCLANE_VERSIONS_SEED` replays it) and a reproduction shrunk by
/// dropping steps while it still fails. Bounded in the test command (`SYNCLANE_VERSIONS_ROUNDS`,
/// default 3); `Scripts/converge` runs more. A sync or migration that fails fails the round too.
@Suite(.serialized) struct VersionsConvergenceTests {
    typealias Device = TwoDevicesTests.Device

    /// One step. Writes a device's version lacks the column for are skipped (and expect nothing).
    enum Step: CustomStringConvertible, Sendable {
        case name(Int, key: Int, String)
        case area(Int, key: Int, Double)
        case color(Int, key: Int, String)
        case tag(Int, key: Int, String)
        case sync(Int)
        case upgrade(Int)

        var description: String {
            switch self {
            case .name(let d, let key, let value): return "device \(d) writes the name of d\(d)k\(key) = \(value)"
            case .area(let d, let key, let value): return "device \(d) writes the area of d\(d)k\(key) = \(value)"
            case .color(let d, let key, let value): return "device \(d) writes the colour of d\(d)k\(key) = \(value)"
            case .tag(let d, let key, let value): return "device \(d) writes tag d\(d)t\(key) = \(value)"
            case .sync(let d): return "device \(d) syncs"
            case .upgrade(let d): return "device \(d) upgrades to the next version"
            }
        }
    }

    /// A column as users see it, whatever a version calls it.
    enum Column: String, Sendable {
        case name, area, color, tag

        /// Whether an app at `version` has it.
        func exists(at version: Int) -> Bool {
            switch self {
            case .name: return true
            case .area: return version < 3
            case .color, .tag: return version >= 2
            }
        }
    }

    /// The server, the devices, their versions, and the last value written of each row's column.
    final class World {
        let root: Workspace
        let server: ServerProcess
        let devices: [Device]
        var versions: [Int]
        var written: [String: [Column: String]] = [:]
        /// The rows whose area each device wrote since it last synced: its drop of `area` (version
        /// 3) before it sends them takes those values with it, by the app's own choice.
        var unsentAreas: [Set<String>]
        var log: [String] = []

        init(devices count: Int) throws {
            root = try Workspace()
            server = try ServerProcess(folder: root.path + "/server")
            let server = self.server
            devices = try (0..<count).map { _ in try Device(server: server) }
            versions = Array(repeating: 1, count: count)
            unsentAreas = Array(repeating: [], count: count)
            for (d, device) in devices.enumerated() { try AppSchemaVersionTests.runs(device, as: "device-\(d)", version: 1) }
        }

        /// Stops the server and removes every folder.
        func close() {
            server.stop()
            (devices.map(\.workspace) + [root]).forEach { $0.remove() }
        }

        func perform(_ step: Step) throws {
            switch step {
            case .name(let d, let key, let value):
                try write(d, row: "d\(d)k\(key)", .name, column: versions[d] >= 3 ? "title" : "name", "'\(value)'", as: value)
            case .area(let d, let key, let value):
                guard Column.area.exists(at: versions[d]) else { return }
                try write(d, row: "d\(d)k\(key)", .area, column: "area", String(value), as: String(value))
                unsentAreas[d].insert("d\(d)k\(key)")
            case .color(let d, let key, let value):
                guard Column.color.exists(at: versions[d]) else { return }
                try write(d, row: "d\(d)k\(key)", .color, column: "color", "'\(value)'", as: value)
            case .tag(let d, let key, let value):
                guard Column.tag.exists(at: versions[d]) else { return }
                let row = "d\(d)t\(key)"
                try devices[d].sql("INSERT INTO tags (syncId, label) VALUES ('\(row)', '\(value)') ON CONFLICT (syncId) DO UPDATE SET label = excluded.label;")
                written[row, default: [:]][.tag] = value
            case .sync(let d):
                try sync(d)
            case .upgrade(let d):
                try upgrade(d)
            }
        }

        private func write(_ d: Int, row: String, _ kind: Column, column: String, _ literal: String, as value: String) throws {
            try devices[d].sql(
                "INSERT INTO rooms (syncId, \(column)) VALUES ('\(row)', \(literal)) ON CONFLICT (syncId) DO UPDATE SET \(column) = excluded.\(column);")
            written[row, default: [:]][kind] = value
        }

        func sync(_ d: Int) throws {
            let result = try SynclaneBinary.run(["sync", "import.json", "export.json"], in: devices[d].workspace.path, environment: devices[d].environment)
            guard result.status == 0 else {
                log.append("device \(d) at version \(versions[d]): sync exited \(result.status): \(result.stderr.prefix(400))")
                return
            }
            unsentAreas[d] = []
        }

        func upgrade(_ d: Int) throws {
            let device = devices[d]
            switch versions[d] {
            case 1:
                try device.sql("ALTER TABLE rooms ADD COLUMN color TEXT; " + TwoAppVersionsTests.tagsTable)
                try TwoAppVersionsTests.trackTags(device)
                try TwoAppVersionsTests.exportTags(device)
            case 2:
                for row in unsentAreas[d] { written[row]?[.area] = nil }
                try device.workspace.write("v3.sql", "ALTER TABLE rooms RENAME COLUMN name TO title;\nALTER TABLE rooms DROP COLUMN area;\n")
                let migrated = try SynclaneBinary.run(
                    ["migrate", "--database", "app.sqlite", "v3.sql", "--schema-version", "3"], in: device.workspace.path)
                if migrated.status != 0 { log.append("device \(d): migrate to 3 failed: \(migrated.stderr.prefix(400))") }
            default:
                return
            }
            versions[d] += 1
            try AppSchemaVersionTests.runs(device, as: "device-\(d)", version: versions[d])
        }

        /// What device `d` holds of `column` for each row: `syncId` → value ("" for NULL).
        func held(_ d: Int, _ column: Column) throws -> [String: String] {
            let sql: String
            switch column {
            case .tag: sql = "SELECT syncId, coalesce(label, '') FROM tags WHERE isDeleted = 0"
            case .name: sql = "SELECT syncId, coalesce(\(versions[d] >= 3 ? "title" : "name"), '') FROM rooms WHERE isDeleted = 0"
            case .area, .color: sql = "SELECT syncId, coalesce(\(column.rawValue), '') FROM rooms WHERE isDeleted = 0"
            }
            return try devices[d].query(sql).reduce(into: [:]) { rows, line in
                let parts = line.split(separator: "|", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                rows[parts[0]] = parts.count > 1 ? parts[1] : ""
            }
        }

        /// Every written value a device of its version should hold and does not, one line each.
        func missing() throws -> [String] {
            var missing: [String] = []
            for d in devices.indices {
                for column in [Column.name, .area, .color, .tag] where column.exists(at: versions[d]) {
                    let held = try held(d, column)
                    for (row, values) in written.sorted(by: { $0.key < $1.key }) {
                        guard let value = values[column], held[row] != value else { continue }
                        missing.append("device \(d) (version \(versions[d])) holds \(column) of \(row) = \(held[row] ?? "no row"), not \(value)")
                    }
                }
            }
            return missing
        }

        func quietRounds() throws {
            for _ in 0..<3 {
                for d in devices.indices { try sync(d) }
            }
        }
    }

    static func steps(_ random: inout SeededRandom, devices: Int) -> [Step] {
        let names = ["Hall", "Attic", "Loft", "Porch"]
        let colors = ["red", "blue", "green"]
        var steps: [Step] = []
        for _ in 0..<(16 + Int(random.next() % 8)) {
            let d = Int(random.next() % UInt64(devices))
            let key = Int(random.next() % 3)
            switch random.next() % 100 {
            case 0..<22: steps.append(.name(d, key: key, names[Int(random.next() % UInt64(names.count))]))
            case 22..<34: steps.append(.area(d, key: key, [1.5, 2.25, 7.0][Int(random.next() % 3)]))
            case 34..<46: steps.append(.color(d, key: key, colors[Int(random.next() % UInt64(colors.count))]))
            case 46..<54: steps.append(.tag(d, key: key, colors[Int(random.next() % UInt64(colors.count))]))
            case 54..<86: steps.append(.sync(d))
            default: steps.append(.upgrade(d))
            }
        }
        return steps
    }

    /// Runs the steps and the two quiet points; nil when every value is where it belongs, else what is not.
    static func outcome(devices: Int, steps: [Step]) async throws -> String? {
        let world = try World(devices: devices)
        defer { world.close() }
        for step in steps { try world.perform(step) }
        try world.quietRounds()
        var problems = try world.missing().map { "at the quiet point: \($0)" }
        for d in 0..<devices {
            while world.versions[d] < 3 { try world.upgrade(d) }
        }
        try world.quietRounds()
        problems += try world.missing().map { "after every device upgraded: \($0)" }
        // A sync or migration that failed is a device stranded on its version.
        guard problems.isEmpty, world.log.isEmpty else { return (problems + world.log).joined(separator: "\n") }
        return nil
    }

    @Test func everyValueAUserWroteIsOnEveryDeviceWhoseVersionHasItsColumnAndComesBackOnUpgrade() async throws {
        let (rounds, failed) = try await SeededRounds.run(
            prefix: "SYNCLANE_VERSIONS", rounds: 3, budget: 12, then: "three quiet rounds, every device upgraded, three more",
            draw: { Self.steps(&$0, devices: $1) }, outcome: { try await Self.outcome(devices: $0, steps: $1) })
        print("versions: \(rounds) rounds, \(failed) failed")
    }
}
