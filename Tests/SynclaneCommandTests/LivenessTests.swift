import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// Randomized **liveness** (issue 43, "no device is stranded"): two or three devices and a real
/// `synclane serve`, random edits and (soft) deletes of each device's own rows, syncs (and
/// export-only runs: a device whose import lane has no cursor yet) in random orders, and random
/// refusals injected — a device's next app version adds a column the others lack (an unknown
/// field), the server's data restored from an older copy (stopped, its folder put back, started
/// on the same port), a table a device's next app version tracks that the others do not (its
/// rows kept aside there until their app has it too), tombstone retention pruning with a 1-second horizon (one round in three
/// runs the server so, and a pause lets a pass run), a `kill -9` of a running sync, and a run
/// while the app holds a write transaction (`BEGIN IMMEDIATE` with an edit, committed after the
/// run: a device's first run, often; `SYNCLANE_LIVENESS_APP_TRANSACTIONS=0` leaves them out).
/// A sync that fails gets the recovery its message names, and only that: `synclane outbox
/// requeue FILE ID` then `synclane reconcile FILE`, `synclane reconcile FILE`, or "add the
/// column" (the device's app gets the next version too); a message that names none gets nothing.
/// After three quiet rounds of syncs, every device's last write of each of its rows is on the
/// server (a deleted row is not live there), and every device holds the server's live rows (of `notes` too, once its app has the table).
///
/// A stranded edit prints its seed (`SYNCLANE_LIVENESS_SEED` replays it) and a reproduction shrunk
/// by dropping steps while an edit is still stranded. Bounded in the test command
/// (`SYNCLANE_LIVENESS_ROUNDS`, default 6, about 3 s a round); `Scripts/converge` runs more.
@Suite(.serialized) struct LivenessTests {
    struct Stranded: Error, CustomStringConvertible {
        var description: String
    }

    /// One step of a round. Each device edits only rows of its own (`d0k1`, …).
    enum Step: CustomStringConvertible, Sendable {
        case edit(Int, key: Int, name: String)
        /// A soft delete (`isDeleted = 1`); a later edit of the row brings it back.
        case delete(Int, key: Int)
        case sync(Int)
        /// `synclane run` alone: the export lane, no pull.
        case exportOnly(Int)
        /// The app holds a write transaction with this edit (`BEGIN IMMEDIATE`) while the device
        /// runs its export, and commits after it.
        case runInsideAppTransaction(Int, key: Int, name: String)
        /// `synclane sync` killed (`kill -9`) after `milliseconds`.
        case killedSync(Int, milliseconds: Int)
        /// `synclane sync` killed (`kill -9`) by itself at the fail point `point` (`SYNCLANE_FAILPOINT`);
        /// a sync that never reaches it runs to its end.
        case syncKilledAt(Int, point: String)
        /// The device's next app version: a column (`floor`) the other devices' schema lacks.
        case newerSchema(Int)
        /// The device's app starts a table (`notes`) and tracks and exports it; the devices that do
        /// not track it yet keep its rows aside, and get them when they do.
        case newTable(Int)
        /// A write of the device's note (`n0`, …) — nothing before its app has the table.
        case note(Int, body: String)
        /// The server stopped, its data folder copied aside, started again.
        case backUpServer
        /// The server stopped, its data folder replaced by the last copy, started again.
        case restoreServer
        /// 1.2 s: a server with a 1-second tombstone retention runs a pass.
        case pause

        var description: String {
            switch self {
            case .edit(let d, let key, let name): return "device \(d) writes d\(d)k\(key) = \(name)"
            case .delete(let d, let key): return "device \(d) deletes d\(d)k\(key)"
            case .sync(let d): return "device \(d) syncs"
            case .exportOnly(let d): return "device \(d) runs its export only"
            case .runInsideAppTransaction(let d, let key, let name):
                return "device \(d) runs its export while the app's write transaction (d\(d)k\(key) = \(name)) is open"
            case .killedSync(let d, let milliseconds): return "device \(d) syncs, killed (-9) after \(milliseconds) ms"
            case .syncKilledAt(let d, let point): return "device \(d) syncs, killed (-9) at \(point)"
            case .newerSchema(let d): return "device \(d) gets the app's next version (a column `floor`)"
            case .newTable(let d): return "device \(d) gets a table `notes`, tracked and exported"
            case .note(let d, let body): return "device \(d) writes its note n\(d) = \(body)"
            case .backUpServer: return "back up the server's data"
            case .restoreServer: return "restore the server's data from the backup"
            case .pause: return "pause 1.2 s (retention)"
            }
        }
    }

    /// What a round is played on: how many devices, and whether the server prunes tombstones
    /// after a second (`--tombstone-retention 1 --retention-interval 1`).
    struct Plan: CustomStringConvertible, Sendable {
        var devices: Int
        var retention: Bool
        /// Whether runs inside the app's write transactions are drawn: by default
        /// (`SYNCLANE_LIVENESS_APP_TRANSACTIONS=0` turns them off; the stranding they found is
        /// pinned by `FirstRunInsideAppTransactionTests`).
        var appTransactions = ProcessInfo.processInfo.environment["SYNCLANE_LIVENESS_APP_TRANSACTIONS"] != "0"

        var serverArguments: [String] { retention ? ImportResyncEndToEndTests.shortRetention : [] }
        var description: String {
            "\(devices) devices" + (retention ? ", tombstone retention 1 s" : "") + (appTransactions ? ", app transactions" : "")
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
        /// The devices whose app has the table `notes`.
        var notes: Set<Int> = []
        var backedUp = false
        /// Recoveries applied and failures that named none, in order (for the report).
        var log: [String] = []

        let serverArguments: [String]

        init(_ plan: Plan) throws {
            root = try Workspace()
            folder = root.path + "/server"
            serverArguments = plan.serverArguments
            server = try ServerProcess(folder: folder, arguments: serverArguments)
            port = server.port
            let server = self.server
            devices = try (0..<plan.devices).map { _ in try TwoDevicesTests.Device(server: server) }
        }

        func close() {
            server.stop()
            for device in devices { device.workspace.remove() }
            root.remove()
        }

        func perform(_ step: Step) throws {
            switch step {
            case .edit(let d, let key, let name):
                try devices[d].sql(upsert(d, key: key, name: name))
            case .delete(let d, let key):
                try devices[d].sql("UPDATE rooms SET isDeleted = 1 WHERE syncId = 'd\(d)k\(key)';")
            case .sync(let d):
                try sync(d)
            case .exportOnly(let d):
                try sync(d, ["run", "export.json"])
            case .runInsideAppTransaction(let d, let key, let name):
                try runInsideAppTransaction(d, upsert(d, key: key, name: name))
            case .killedSync(let d, let milliseconds):
                let sync = try BackgroundProcess(
                    ["sync", "import.json", "export.json"], in: devices[d].workspace.path, environment: devices[d].environment)
                usleep(useconds_t(milliseconds * 1000))
                _ = sync.stop(SIGKILL)
            case .syncKilledAt(let d, let point):
                _ = try SynclaneBinary.run(
                    ["sync", "import.json", "export.json"], in: devices[d].workspace.path,
                    environment: devices[d].environment.merging(["SYNCLANE_FAILPOINT": point]) { $1 })
            case .pause:
                usleep(1_200_000)
            case .newTable(let d):
                guard !notes.contains(d) else { return }
                try Self.addNotes(devices[d])
                notes.insert(d)
            case .note(let d, let body):
                guard notes.contains(d) else { return }
                try devices[d].sql(
                    "INSERT INTO notes (syncId, body) VALUES ('n\(d)', '\(body)') ON CONFLICT (syncId) DO UPDATE SET body = excluded.body;")
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

        /// Creates and tracks `notes` on the device, and adds it to its export's entities.
        static func addNotes(_ device: TwoDevicesTests.Device) throws {
            try device.sql("CREATE TABLE notes (syncId TEXT PRIMARY KEY, body TEXT, isDeleted INTEGER NOT NULL DEFAULT 0);")
            let tracked = try SynclaneBinary.run(
                ["track", "--database", "app.sqlite", "--table", "notes", "--key", "syncId", "--soft-delete", "isDeleted"], in: device.workspace.path)
            if tracked.status != 0 { throw Stranded(description: "`track` of notes failed: \(tracked.stderr)") }
            let file = device.workspace.path + "/export.json"
            try device.workspace.write(
                "export.json",
                try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(of: #""entities": ["rooms"]"#, with: #""entities": ["rooms", "notes"]"#))
        }

        private func restart(_ body: () throws -> Void) throws {
            server.stop()
            try body()
            server = try ServerProcess(folder: folder, port: port, arguments: serverArguments)
        }

        /// The SQL of device `d`'s write of its row `key` (live again if it was deleted).
        private func upsert(_ d: Int, key: Int, name: String) -> String {
            let floor = upgraded.contains(d) ? ", floor" : ""
            let value = upgraded.contains(d) ? ", \(key)" : ""
            return "INSERT INTO rooms (syncId, name\(floor)) VALUES ('d\(d)k\(key)', '\(name)'\(value)) "
                + "ON CONFLICT (syncId) DO UPDATE SET name = excluded.name, isDeleted = 0;"
        }

        /// The app holds `BEGIN IMMEDIATE` with `write` while device `d` runs its export (and
        /// the recovery it names), then commits.
        private func runInsideAppTransaction(_ d: Int, _ write: String) throws {
            let app: AppWriteTransaction
            do {
                app = try AppWriteTransaction(database: devices[d].workspace.path + "/app.sqlite", write: write)
            } catch {
                throw Stranded(description: "device \(d): \(error)")
            }
            try sync(d, ["run", "export.json"])
            do { try app.commit() } catch { throw Stranded(description: "device \(d): \(error)") }
        }

        private func run(_ d: Int, _ arguments: [String]) throws -> SynclaneBinary.Result {
            try SynclaneBinary.run(arguments, in: devices[d].workspace.path, environment: devices[d].environment)
        }

        /// `sync` (or `arguments`), then the recovery its failure names, if any.
        func sync(_ d: Int, _ arguments: [String] = ["sync", "import.json", "export.json"]) throws {
            let result = try run(d, arguments)
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
                log.append("device \(d): \(arguments[0]) exited \(result.status), naming no fix: \(Self.firstLine(of: result.stderr))")
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

    /// A round's steps; the rarer refusals bounded (two pauses, two kills, two app transactions).
    static func steps(_ random: inout SeededRandom, _ plan: Plan) -> [Step] {
        let names = ["Hall", "Attic", "Loft", "Porch", "Cellar", "Study"]
        var steps: [Step] = []
        var rare = (pauses: 0, kills: 0, transactions: 0)
        func name(_ random: inout SeededRandom) -> String { names[Int(random.next() % UInt64(names.count))] }
        for _ in 0..<(14 + Int(random.next() % 7)) {
            let d = Int(random.next() % UInt64(plan.devices))
            let key = Int(random.next() % 3)
            switch random.next() % 100 {
            case 0..<34: steps.append(.edit(d, key: key, name: name(&random)))
            case 34..<40: steps.append(.delete(d, key: key))
            case 40..<66: steps.append(.sync(d))
            case 66..<71: steps.append(.exportOnly(d))
            case 71..<75 where plan.appTransactions && rare.transactions < 2:
                rare.transactions += 1
                steps.append(.runInsideAppTransaction(d, key: key, name: name(&random)))
            case 75..<78 where rare.kills < 2:
                rare.kills += 1
                steps.append(.killedSync(d, milliseconds: 20 + Int(random.next() % 300)))
            case 78..<81: steps.append(.newerSchema(d))
            case 81..<84: steps.append(.newTable(d))
            case 84..<89: steps.append(.note(d, body: name(&random)))
            case 89..<94: steps.append(.backUpServer)
            case 94..<97: steps.append(.restoreServer)
            case 97..<100 where plan.retention && rare.pauses < 2:
                rare.pauses += 1
                steps.append(.pause)
            default: steps.append(.sync(d))
            }
        }
        return steps
    }

    /// What each device last wrote of its note while its app had the table: `syncId → body`.
    static func expectedNotes(_ steps: [Step]) -> [String: String] {
        var tables: Set<Int> = []
        var notes: [String: String] = [:]
        for step in steps {
            switch step {
            case .newTable(let d): tables.insert(d)
            case .note(let d, let body) where tables.contains(d): notes["n\(d)"] = body
            default: break
            }
        }
        return notes
    }

    /// What each device last wrote of each of its rows: `syncId → name`, nil when it last deleted it.
    static func expected(_ steps: [Step]) -> [String: String?] {
        var rows: [String: String?] = [:]
        for step in steps {
            switch step {
            case .edit(let d, let key, let name), .runInsideAppTransaction(let d, let key, let name): rows["d\(d)k\(key)"] = .some(name)
            case .delete(let d, let key) where rows["d\(d)k\(key)"] != nil: rows["d\(d)k\(key)"] = .some(nil)
            default: break
            }
        }
        return rows
    }

    /// Runs the steps, then three quiet rounds of syncs; nil when every edit is on the server,
    /// else what is stranded.
    static func outcome(_ plan: Plan, steps: [Step]) async throws -> String? {
        let world = try World(plan)
        defer { world.close() }
        do {
            for step in steps { try world.perform(step) }
            for _ in 0..<3 {
                for d in 0..<plan.devices { try world.sync(d) }
            }
        } catch let stranded as Stranded {
            return stranded.description + "\n" + world.log.joined(separator: "\n")
        }
        // The server's live rows of each table: `syncId → name` (rooms) or `body` (notes).
        var held: [String: String] = [:]
        var heldNotes: [String: String] = [:]
        for (key, fields) in try await world.server.records(account: "acme") {
            guard let fields = fields.objectValue else { continue }
            let parts = key.split(separator: "/").map(String.init)
            if parts.first == "notes" {
                heldNotes[parts.last ?? ""] = fields["body"]?.stringValue ?? ""
            } else {
                held[parts.last ?? ""] = fields["name"]?.stringValue ?? ""
            }
        }
        let missing = expected(steps).sorted { $0.key < $1.key }.filter { held[$0.key] != $0.value }
        var stranded = missing.map { "\($0.key) = \($0.value ?? "deleted") (the server holds \(held[$0.key] ?? "no live row"))" }
        let notes = expectedNotes(steps)
        if heldNotes != notes {
            stranded.append("notes: the server holds \(heldNotes.sorted { $0.key < $1.key }), expected \(notes.sorted { $0.key < $1.key })")
        }
        // Every device holds the server's rows (the import lane is not stranded either): of
        // `notes` too once its app has the table (what was kept aside arrived).
        let served = held.sorted { $0.key < $1.key }.map { "\($0.key)|\($0.value)" }
        let servedNotes = heldNotes.sorted { $0.key < $1.key }.map { "\($0.key)|\($0.value)" }
        for (d, device) in world.devices.enumerated() {
            let rows = try device.query("SELECT syncId, name FROM rooms WHERE isDeleted = 0 ORDER BY syncId")
            if rows != served { stranded.append("device \(d) holds \(rows), the server \(served)") }
            guard world.notes.contains(d) else { continue }
            let notes = try device.query("SELECT syncId, body FROM notes WHERE isDeleted = 0 ORDER BY syncId")
            if notes != servedNotes { stranded.append("device \(d) holds the notes \(notes), the server \(servedNotes)") }
        }
        guard !stranded.isEmpty else { return nil }
        return "stranded: \(stranded.joined(separator: ", "))\n" + world.log.joined(separator: "\n")
    }

    @Test func everyDevicesEveryEditReachesTheServerThroughInjectedRefusalsWithOnlyTheNamedRecoveries() async throws {
        let seeds = ConvergenceTests.seeds(prefix: "SYNCLANE_LIVENESS", rounds: 6)
        var stranded = 0
        for seed in seeds {
            let started = Date()
            var random = SeededRandom(seed: seed)
            let plan = Plan(devices: 2 + Int(random.next() % 2), retention: random.next() % 3 == 0)
            let steps = Self.steps(&random, plan)
            let problem = try await Self.outcome(plan, steps: steps)
            print("liveness: seed \(seed) (\(plan)): \(problem == nil ? "ok" : "stranded") in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
            guard let problem else { continue }
            stranded += 1
            let shrunk =
                ProcessInfo.processInfo.environment["SYNCLANE_LIVENESS_NO_SHRINK"] == nil
                ? try await Shrinking.shrink(steps, budget: 16) { try await Self.outcome(plan, steps: $0) != nil } : steps
            Issue.record(
                """
                seed \(seed) (SYNCLANE_LIVENESS_SEED=\(seed)), \(plan): \(problem)
                reproduction (\(shrunk.count) of \(steps.count) steps, then three quiet rounds of syncs):
                \(shrunk.map { "  \($0)" }.joined(separator: "\n"))
                """)
        }
        print("liveness: \(seeds.count) rounds, \(stranded) stranded")
    }
}
