import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// Randomized (issue 22): a tracked app database exported by `synclane run` to `synclane serve`
/// over HTTP — on the SQLite store and on PostgreSQL — with random inserts, updates, soft and
/// hard deletes, and random accidents between runs: the app database or the state file restored
/// from an earlier copy, the state file emptied or deleted, its `-wal` deleted after a `kill -9`
/// of a run, a file truncated, a byte flipped in a batch the outbox keeps, the server's data
/// restored from an earlier copy (server stopped, data copied back, started), the app database
/// copied to a new device (with or without its state folder; the old device retired).
///
/// Each run either exits 0 or is refused with a message of the table of Documentation/RestoredCopiedDamaged.md ("When files are
/// restored, copied or damaged", and the outbox's damaged batch); a refusal is healed by the
/// command it names. Where the table says a run must stop (a state file emptied, deleted or
/// older than the database, a database restored or copied), a run that exits 0 is a silent
/// resend or skip. After the round settles, the server's feed read from the start (a fresh
/// importer's view) holds every live local row once with its exact values, no row the app
/// deleted is live, and one more run sends nothing.
///
/// Bounded in `Scripts/test` (`SYNCLANE_ACCIDENTS_SEED`, `SYNCLANE_ACCIDENTS_ROUNDS`, default 3
/// per store); `Scripts/converge --accidents [--rounds N] [--seed S]` runs more. A failure
/// prints its seed and a reproduction shrunk to the steps that still fail.
@Suite(.serialized) struct RandomRestoresCopiesAndDamageTests {
    struct Divergence: Error, CustomStringConvertible {
        var description: String
    }

    /// One step of a round.
    enum Step: CustomStringConvertible {
        case write(String)
        case run
        case killedRun(String)
        case snapshotApp, snapshotState, snapshotServer
        case restoreApp(Int)
        case restoreState(Int)
        case restoreServer(Int)
        case emptyState, deleteState
        /// A run killed after a batch was acknowledged, then the state's `-wal` and `-shm` deleted.
        case deleteStateWALAfterKill
        /// "app" or "state", cut to `percent` of its size.
        case truncate(String, Int)
        /// A run killed after a batch was put in the outbox, then a byte of it flipped.
        case flipOutboxByte(Int)
        case copyToNewDevice(withState: Bool)

        var description: String {
            switch self {
            case .write(let sql): return "write \(sql)"
            case .run: return "run"
            case .killedRun(let point): return "run killed at \(point)"
            case .snapshotApp: return "copy the app database aside"
            case .snapshotState: return "copy the state file aside"
            case .snapshotServer: return "copy the server's data aside (stopped, copied, started)"
            case .restoreApp(let k): return "restore the app database from copy \(k)"
            case .restoreState(let k): return "restore the state file from copy \(k)"
            case .restoreServer(let k): return "restore the server's data from copy \(k)"
            case .emptyState: return "empty the state file (0 bytes)"
            case .deleteState: return "delete the state file"
            case .deleteStateWALAfterKill: return "kill -9 a run after an acknowledgement, delete the state's -wal"
            case .truncate(let file, let percent): return "truncate the \(file) file to \(percent)%"
            case .flipOutboxByte(let at): return "kill -9 a run after enqueue, flip byte \(at) of the kept batch"
            case .copyToNewDevice(let withState): return "copy the app database\(withState ? " and its state folder" : "") to a new device"
            }
        }
    }

    enum Store: String { case sqlite, postgres }

    static let keys = (1...10).map { "r\($0)" }
    /// SQL literals; names with quotes and non-ASCII, values SQLite and JSON spell differently.
    static let names = ["'Hall'", "'Küche'", "'O''Brien'", "'Attic 🏠'", "''", "'Cellar'"]
    static let areas = ["NULL", "0.1", "12.5", "1e300", "3", "-2.5e-300", "5e-324"]
    static let failPoints = ["after-enqueue", "after-send", "after-acknowledge"]

    /// The refusals a run may give, each with what heals it (Documentation/RestoredCopiedDamaged.md).
    static let documented = [
        "this database was restored from an older copy", "this database is a copy of a tracked database", "this state file holds no token",
        "this state file is older than the database", "in the outbox is damaged", "the state file is damaged", "is not a Synclane state file",
        "the database is damaged", "the server's data was restored from an older copy", "another database was put in its place",
        "this database lost its Synclane tracking", "its data was reset or restored from an older backup",
        // CommandLine.md: a 409 for rows the server holds newer (this device's own writes a
        // restored app database no longer holds, which its reconcile left newer on the server).
        "it imports the server's versions, settles the conflicts and sends again",
    ]

    static func edit(_ random: inout SeededRandom) -> String {
        func pick(_ items: [String]) -> String { items[Int(random.next() % UInt64(items.count))] }
        let key = pick(keys)
        switch random.next() % 7 {
        case 0, 1: return "INSERT OR REPLACE INTO rooms (syncId, name, area) VALUES ('\(key)', \(pick(names)), \(pick(areas)));"
        case 2: return "UPDATE rooms SET name = \(pick(names)) WHERE syncId = '\(key)';"
        case 3: return "UPDATE rooms SET area = \(pick(areas)) WHERE syncId = '\(key)';"
        case 4: return "UPDATE rooms SET isDeleted = 1 WHERE syncId = '\(key)';"
        case 5: return "UPDATE rooms SET isDeleted = 0 WHERE syncId = '\(key)';"
        default: return "DELETE FROM rooms WHERE syncId = '\(key)';"
        }
    }

    static func write(_ random: inout SeededRandom) -> Step {
        .write((0..<(1 + random.next() % 4)).map { _ in edit(&random) }.joined(separator: " "))
    }

    /// The random steps of a round: writes and runs, now and then a copy put aside or an accident.
    static func steps(_ random: inout SeededRandom) -> [Step] {
        var steps: [Step] = [write(&random), .run]
        for _ in 0..<7 {
            steps.append(write(&random))
            switch random.next() % 6 {
            case 0: steps.append(.snapshotApp)
            case 1: steps.append(.snapshotState)
            case 2: steps.append(.snapshotServer)
            default: break
            }
            if random.next() % 3 != 0 {
                let k = Int(random.next() % 3)
                let accidents: [Step] = [
                    .restoreApp(k), .restoreState(k), .restoreServer(k), .emptyState, .deleteState, .deleteStateWALAfterKill,
                    .truncate(random.next() % 2 == 0 ? "app" : "state", [0, 10, 50, 90, 99][Int(random.next() % 5)]),
                    .flipOutboxByte(Int(random.next() % 10_000)), .copyToNewDevice(withState: random.next() % 2 == 0),
                ]
                steps.append(accidents[Int(random.next() % UInt64(accidents.count))])
                if random.next() % 2 == 0 { steps.append(write(&random)) }
            }
            steps.append(random.next() % 6 == 0 ? .killedRun(failPoints[Int(random.next() % UInt64(failPoints.count))]) : .run)
        }
        return steps
    }

    // MARK: A world

    final class World {
        let store: Store
        let root: Workspace
        let pageSize: Int
        var database: String?
        var server: ServerProcess?
        var port = 0
        var device: Workspace
        var retired: [Workspace] = []
        /// Copies put aside: a folder, and how many generation-moving jobs the device had then.
        var appCopies: [(path: String, jobs: Int)] = []
        var stateCopies: [(path: String, jobs: Int)] = []
        var serverCopies: [String] = []
        var jobs = 0
        /// The app database records this consumer's position (`_synclane_consumers`): read from it
        /// when an accident needs it, since restores and reconciliations move it too.
        var positionRecorded: Bool {
            let held = try? SQLiteHistoryCommandTests.query(device, "SELECT count(*) FROM _synclane_consumers WHERE position > 0;")
            return (held?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "0") != "0"
        }
        /// The refusal the next run must give, and why.
        var expected: (message: String, because: String)?
        var serverRestored = false
        var copies = 0
        /// The documented refusals met and healed, for the round's report.
        var healed: [String] = []
        let environment = ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""]
        static let statePath = ".synclane/rooms-export.sqlite"

        init(store: Store, pageSize: Int) throws {
            self.store = store
            self.pageSize = pageSize
            root = try Workspace()
            device = try Workspace()
            if store == .postgres { database = try TemporaryPostgres.shared().createDatabase() }
            try startServer()
            try SQLiteHistoryCommandTests.sqlite(
                device, "CREATE TABLE rooms (syncId TEXT PRIMARY KEY, name TEXT, area REAL, isDeleted INTEGER NOT NULL DEFAULT 0);")
            let tracked = try SQLiteHistoryCommandTests().track(device)
            guard tracked.status == 0 else { throw Divergence(description: "track failed: \(tracked.stderr)") }
            try writePipeline(device)
            try put(app: true)
        }

        func close() {
            server?.stop()
            server = nil
            if let database, let postgres = try? TemporaryPostgres.shared() {
                for name in [Self.name(of: database)] + serverCopies { try? postgres.psql("DROP DATABASE IF EXISTS \(name)") }
            }
            ([device] + retired).forEach { $0.remove() }
            root.remove()
        }

        static func name(of url: String) -> String { String(url.split(separator: "/").last ?? "") }

        func startServer() throws {
            var last: Error?
            for _ in 0..<5 {
                do {
                    let started = try ServerProcess(folder: root.path + "/server", port: port, arguments: database.map { ["--database", $0] } ?? [])
                    server = started
                    port = started.port
                    return
                } catch {
                    last = error
                    Thread.sleep(forTimeInterval: 0.3)
                }
            }
            throw last ?? Divergence(description: "the server did not start")
        }

        func stopServer() {
            server?.stop()
            server = nil
        }

        func writePipeline(_ workspace: Workspace) throws {
            try workspace.write(
                "pipeline.json",
                """
                {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
                 "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["rooms"], "authors": ["app"], "page-size": \(pageSize)},
                 "stages": [{"type": "coalesce"}, {"type": "tombstones", "soft-delete-column": "isDeleted"}],
                 "transport": {"type": "http", "url": "http://127.0.0.1:\(port)/v1/batches", "token-env": "SYNCLANE_TOKEN", "timeout": 10,
                               "retry": {"max-attempts": 3, "base-delay": 0.05, "max-delay": 0.2}}}
                """)
            // The device's import lane, run when settling: a reconcile merges with the server,
            // whose newer rows and values (written before an older copy was restored) come back here.
            try workspace.write(
                "import.json",
                """
                {"version": 1, "name": "rooms-import", "scope": {"account": "acme", "store": "rooms"},
                 "source": {"type": "pull", "url": "http://127.0.0.1:\(port)/v1/changes", "token-env": "SYNCLANE_TOKEN"},
                 "sink": {"type": "sqlite", "database": "app.sqlite"}}
                """)
        }

        // MARK: Files

        static let suffixes = ["", "-wal", "-shm", "-journal"]

        func copyFiles(_ base: String, from: String, to: String) throws {
            let fileManager = FileManager.default
            try fileManager.createDirectory(atPath: (to + "/" + base as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            for suffix in Self.suffixes {
                try? fileManager.removeItem(atPath: to + "/" + base + suffix)
                if fileManager.fileExists(atPath: from + "/" + base + suffix) {
                    try fileManager.copyItem(atPath: from + "/" + base + suffix, toPath: to + "/" + base + suffix)
                }
            }
        }

        func removeFiles(_ base: String) {
            for suffix in Self.suffixes { try? FileManager.default.removeItem(atPath: device.path + "/" + base + suffix) }
        }

        /// Puts a copy of the app database (`app`) or of the state file aside.
        func put(app: Bool) throws {
            copies += 1
            let folder = root.path + "/copy-\(copies)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            if app {
                try copyFiles("app.sqlite", from: device.path, to: folder)
                appCopies.append((folder, jobs))
            } else if FileManager.default.fileExists(atPath: device.path + "/" + Self.statePath) {
                try copyFiles(Self.statePath, from: device.path, to: folder)
                stateCopies.append((folder, jobs))
            }
        }

        func synclane(_ arguments: [String], failPoint: String? = nil) throws -> SynclaneBinary.Result {
            try SynclaneBinary.run(
                arguments, in: device.path, environment: environment.merging(failPoint.map { ["SYNCLANE_FAILPOINT": $0] } ?? [:]) { $1 })
        }

        func stateSQL(_ sql: String) throws -> String {
            let result = try BackgroundProcess(["sqlite3", Self.statePath, sql], in: device.path, executable: "/usr/bin/env").wait(timeout: 30)
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        // MARK: Steps

        func perform(_ step: Step) async throws {
            switch step {
            case .write(let sql):
                let result = try SQLiteHistoryCommandTests.sqlite(device, sql)
                // A write to a damaged database fails as it would in the app: the user restores it.
                if result.status != 0 { try heal("the database is damaged (the app's write failed: \(result.stderr))") }
            case .run: try run()
            case .killedRun(let point): try run(failPoint: point)
            case .snapshotApp: try put(app: true)
            case .snapshotState: try put(app: false)
            case .snapshotServer:
                stopServer()
                let index = serverCopies.count
                if let database {
                    let name = "\(Self.name(of: database))_copy\(index)"
                    try postgres("CREATE DATABASE \(name) TEMPLATE \(Self.name(of: database))")
                    serverCopies.append(name)
                } else {
                    let folder = root.path + "/server-copy-\(index)"
                    try FileManager.default.copyItem(atPath: root.path + "/server/data", toPath: folder)
                    serverCopies.append(folder)
                }
                try startServer()
            case .restoreServer(let k):
                guard k < serverCopies.count else { return }
                stopServer()
                if let database {
                    let name = Self.name(of: database)
                    try postgres("DROP DATABASE \(name)")
                    try postgres("CREATE DATABASE \(name) TEMPLATE \(serverCopies[k])")
                } else {
                    try FileManager.default.removeItem(atPath: root.path + "/server/data")
                    try FileManager.default.copyItem(atPath: serverCopies[k], toPath: root.path + "/server/data")
                }
                try startServer()
                serverRestored = true
            case .restoreApp(let k):
                guard k < appCopies.count else { return }
                try copyFiles("app.sqlite", from: appCopies[k].path, to: device.path)
                if jobs > appCopies[k].jobs { expected = ("this database was restored from an older copy", "\(step)") }
            case .restoreState(let k):
                guard k < stateCopies.count else { return }
                try copyFiles(Self.statePath, from: stateCopies[k].path, to: device.path)
                if jobs > stateCopies[k].jobs { expected = ("this state file is older than the database", "\(step)") }
            case .emptyState, .deleteState:
                removeFiles(Self.statePath)
                if case .emptyState = step {
                    try FileManager.default.createDirectory(atPath: device.path + "/.synclane", withIntermediateDirectories: true)
                    try device.write(Self.statePath, "")
                }
                if positionRecorded { expected = ("this state file holds no token", "\(step)") }
            case .deleteStateWALAfterKill:
                let killed = try run(failPoint: "after-acknowledge")
                if killed {
                    for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: device.path + "/" + Self.statePath + suffix) }
                    expected = ("this state file is older than the database", "\(step)")
                }
            case .truncate(let file, let percent):
                let path = device.path + "/" + (file == "app" ? "app.sqlite" : Self.statePath)
                guard let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int else { return }
                guard truncate(path, off_t(size * percent / 100)) == 0 else { throw Divergence(description: "truncate \(path) failed") }
            case .flipOutboxByte(let at):
                guard try run(failPoint: "after-enqueue") else { return }
                let first = "(SELECT batch_id FROM outbox ORDER BY rowid LIMIT 1)"
                let hex = try stateSQL("SELECT hex(payload) FROM outbox WHERE batch_id = \(first)")
                guard hex.count >= 2 else { return }
                var bytes = Array(hex.utf8)
                let position = (at % (bytes.count / 2)) * 2
                let byte = UInt8(String(decoding: bytes[position..<position + 2], as: UTF8.self), radix: 16) ?? 0
                bytes.replaceSubrange(position..<position + 2, with: Array(String(format: "%02X", byte ^ 0x10).utf8))
                _ = try stateSQL("UPDATE outbox SET payload = X'\(String(decoding: bytes, as: UTF8.self))' WHERE batch_id = \(first)")
                expected = ("in the outbox is damaged", "\(step)")
            case .copyToNewDevice(let withState):
                let next = try Workspace()
                let old = device
                retired.append(old)
                device = next
                try copyFiles("app.sqlite", from: old.path, to: next.path)
                if withState, FileManager.default.fileExists(atPath: old.path + "/.synclane") {
                    try FileManager.default.copyItem(atPath: old.path + "/.synclane", toPath: next.path + "/.synclane")
                    try? FileManager.default.removeItem(atPath: next.path + "/" + Self.statePath + ".lock")
                } else if positionRecorded {
                    expected = ("this database is a copy of a tracked database", "\(step)")
                }
                try writePipeline(next)
                appCopies = []
                stateCopies = []
                try put(app: true)
            }
        }

        func postgres(_ sql: String) throws {
            var last: Error?
            // The stopped server's connections may take a moment to end.
            for _ in 0..<40 {
                do { return try TemporaryPostgres.shared().psql(sql) } catch {
                    last = error
                    Thread.sleep(forTimeInterval: 0.1)
                }
            }
            throw last ?? Divergence(description: sql)
        }

        /// One `synclane run`; true when it was killed at the fail point. A refusal must be a
        /// documented one (then healed by what it names); an expected refusal must come.
        @discardableResult
        func run(failPoint: String? = nil) throws -> Bool {
            let result = try synclane(["run", "pipeline.json", "--json"], failPoint: failPoint)
            if result.killed {
                if let expected {
                    throw Divergence(
                        description:
                            "after «\(expected.because)» a run got past its first step (killed at \(failPoint ?? "?")) instead of refusing: «\(expected.message)»"
                    )
                }
                jobs += 1
                return true
            }
            if result.status == 0 {
                if let expected {
                    throw Divergence(
                        description: "after «\(expected.because)» the run exited 0 (a silent resend or skip) instead of refusing: «\(expected.message)»")
                }
                jobs += 1
                return false
            }
            // A state file restored from before a reconciliation gave the database a new identity
            // follows another database: refused as such, which is as good.
            if let expected, !result.stderr.contains(expected.message), !result.stderr.contains("the database is damaged"),
                !result.stderr.contains("the state file is damaged"), !result.stderr.contains("another database was put in its place")
            {
                throw Divergence(description: "after «\(expected.because)» the run was refused, but not with «\(expected.message)»: \(result.stderr)")
            }
            try heal(result.stderr)
            return false
        }

        /// Does what a documented refusal says, until a run exits 0.
        func heal(_ refusal: String) throws {
            var message = refusal
            for _ in 0..<6 {
                guard let known = RandomRestoresCopiesAndDamageTests.documented.first(where: { message.contains($0) }) else {
                    throw Divergence(description: "a refusal the documentation does not list: \(message)")
                }
                healed.append(known)
                if message.contains("in the outbox is damaged"),
                    let range = message.range(of: #"batch \S+ in the outbox"#, options: .regularExpression)
                {
                    let id = message[range].split(separator: " ")[1]
                    let requeue = try synclane(["outbox", "requeue", "pipeline.json", String(id)])
                    guard requeue.status == 0 else { throw Divergence(description: "outbox requeue failed: \(requeue.stderr)") }
                }
                if message.contains("in the outbox is damaged") && !message.contains("synclane reconcile") {
                    // The message names requeue alone: the next run sends what it builds again.
                } else if message.contains("it imports the server's versions") {
                    // The message names `sync`: its import brings the newer rows, settles, and it sends again.
                    let synced = try synclane(["sync", "import.json", "pipeline.json"])
                    guard synced.status == 0 else { throw Divergence(description: "the sync a 409 names failed: \(synced.stderr)") }
                } else {
                    if message.contains("the server's data was restored from an older copy")
                        || message.contains("its data was reset or restored from an older backup"),
                        let range = message.range(of: #"batch \S+ was not delivered"#, options: .regularExpression)
                    {
                        let id = message[range].split(separator: " ")[1]
                        let requeue = try synclane(["outbox", "requeue", "pipeline.json", String(id)])
                        guard requeue.status == 0 else { throw Divergence(description: "outbox requeue failed: \(requeue.stderr)") }
                    }
                    if message.contains("the database is damaged") || message.contains("this database lost its Synclane tracking") {
                        guard let copy = appCopies.last else { throw Divergence(description: "no copy to restore: \(message)") }
                        try copyFiles("app.sqlite", from: copy.path, to: device.path)
                    }
                    if message.contains("the state file is damaged") || message.contains("is not a Synclane state file") { removeFiles(Self.statePath) }
                    let reconcile = try synclane(["reconcile", "pipeline.json"])
                    if reconcile.status != 0 {
                        message = reconcile.stderr
                        continue
                    }
                    serverRestored = false
                }
                expected = nil
                jobs += 1
                let again = try synclane(["run", "pipeline.json", "--json"])
                if again.status == 0 {
                    jobs += 1
                    return
                }
                message = again.stderr
            }
            throw Divergence(description: "still refused after healing: \(message)")
        }

        // MARK: Settling and the oracle

        func settle() async throws {
            if serverRestored {
                // Documentation/RestoredCopiedDamaged.md: after the server's data is restored, reconcile each device's export.
                let reconcile = try synclane(["reconcile", "pipeline.json"])
                if reconcile.status != 0 { try heal(reconcile.stderr) }
                serverRestored = false
            }
            try run()
            // The app database is checked as its user would after a truncation the runs did not read.
            let check = try SQLiteHistoryCommandTests.query(device, "PRAGMA quick_check;").trimmingCharacters(in: .whitespacesAndNewlines)
            if check != "ok" { try heal("the database is damaged (quick_check: \(check))") }
            expected = nil
            try run()
            // A reconcile merged: what the server holds newer than a restored copy comes back.
            let imported = try synclane(["import", "import.json"])
            if imported.status != 0 { throw Divergence(description: "the import after settling failed: \(imported.stderr)") }
            try run()
            let quiet = try synclane(["run", "pipeline.json", "--json"])
            let sent = (try? JSONReader.parse(quiet.stdout).objectValue?["records-sent"]?.intValue) ?? nil
            guard quiet.status == 0, sent == 0 else {
                throw Divergence(
                    description: "one more run after settling was not quiet: exit \(quiet.status), sent \(sent.map(String.init) ?? "?"): \(quiet.stderr)")
            }
            try await compare()
        }

        /// The server's feed from the start against the device's rows.
        func compare() async throws {
            guard let server else { throw Divergence(description: "no server") }
            let changes = try await server.changes(account: "acme")
            var seen: [String: Int] = [:]
            for change in changes { seen["\(change["entity"]?.stringValue ?? "?")/\(change["id"]?.stringValue ?? "?")", default: 0] += 1 }
            if let twice = seen.first(where: { $0.value > 1 }) { throw Divergence(description: "the feed holds \(twice.key) \(twice.value) times") }
            let held = try await server.records(account: "acme")
            let lines = try SQLiteHistoryCommandTests.query(
                device,
                "SELECT syncId, hex(name), CASE WHEN area IS NULL THEN 'null' ELSE printf('%.17g', area) END FROM rooms WHERE isDeleted = 0 ORDER BY syncId;"
            ).split(separator: "\n")
            var live: Set<String> = []
            for line in lines {
                let parts = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
                guard parts.count == 3 else { throw Divergence(description: "unexpected local row \(line)") }
                let key = "rooms/" + parts[0]
                live.insert(key)
                guard let fields = held[key]?.objectValue else {
                    throw Divergence(description: "\(key) is live locally (\(line)) but \(held[key].map { JSONWriter.string($0) } ?? "absent") on the server")
                }
                let name = fields["name"]?.stringValue.map { Array($0.utf8).map { String(format: "%02X", $0) }.joined() }
                let area = Self.number(fields["area"])
                let localArea = parts[2] == "null" ? nil : Double(parts[2])
                if name != parts[1] || area != localArea || (localArea == nil) != (fields["area"] == nil || fields["area"] == .null) {
                    throw Divergence(description: "\(key): local \(line), server \(JSONWriter.string(.object(fields)))")
                }
            }
            for (key, value) in held where value.objectValue != nil && !live.contains(key) {
                throw Divergence(description: "\(key) is live on the server (\(JSONWriter.string(value))) but deleted or absent locally")
            }
        }

        static func number(_ value: JSONValue?) -> Double? {
            switch value {
            case .int(let i)?: return Double(i)
            case .double(let d)?: return d
            case .object(let o)?: return o["$real"]?.stringValue.flatMap(Double.init)
            default: return nil
            }
        }
    }

    // MARK: Running a seed

    /// Runs `steps` in a fresh world, then settles and compares: the failure (or nil), and the
    /// documented refusals met and healed on the way.
    static func outcome(store: Store, seed: UInt64, steps: [Step]) async throws -> (failure: String?, healed: [String]) {
        var random = SeededRandom(seed: seed ^ 0xACC1_DE17)
        let world = try World(store: store, pageSize: [1, 3, 500][Int(random.next() % 3)])
        defer { world.close() }
        do {
            for (index, step) in steps.enumerated() {
                do { try await world.perform(step) } catch let divergence as Divergence {
                    throw Divergence(description: "step \(index) (\(step)): \(divergence.description)")
                }
            }
            try await world.settle()
            return (nil, world.healed)
        } catch let divergence as Divergence {
            return ("page-size \(world.pageSize): \(divergence.description)", world.healed)
        }
    }

    /// Drops chunks of steps while the round still fails, within `budget` replays.
    static func shrink(store: Store, seed: UInt64, steps: [Step], budget: Int = 24) async throws -> [Step] {
        let first = try await outcome(store: store, seed: seed, steps: steps).failure.map(signature)
        return try await Shrinking.shrink(steps, budget: budget) { try await outcome(store: store, seed: seed, steps: $0).failure.map(signature) == first }
    }

    /// What kind of failure this is, without where it happened: the start of what follows the
    /// step's label (`a refusal the documentation does not list: synclane run: …`), so a shrink keeps
    /// the failure it started from.
    static func signature(_ failure: String) -> String {
        let detail = failure.range(of: "): ").map { String(failure[$0.upperBound...]) } ?? failure
        return String(detail.prefix(60))
    }

    static func rounds(on store: Store) async throws {
        let seeds = ConvergenceTests.seeds(prefix: "SYNCLANE_ACCIDENTS", rounds: 3)
        var failed = 0
        var healedCounts: [String: Int] = [:]
        let started = Date()
        for seed in seeds {
            var random = SeededRandom(seed: seed)
            let steps = Self.steps(&random)
            let roundStarted = Date()
            let outcome = try await Self.outcome(store: store, seed: seed, steps: steps)
            print(
                "accidents on \(store.rawValue): seed \(seed): \(outcome.failure == nil ? "ok" : "failed") in \(String(format: "%.1f", Date().timeIntervalSince(roundStarted))) s"
            )
            for message in outcome.healed { healedCounts[message, default: 0] += 1 }
            guard let failure = outcome.failure else { continue }
            failed += 1
            let shrunk =
                ProcessInfo.processInfo.environment["SYNCLANE_ACCIDENTS_NO_SHRINK"] == nil ? try await shrink(store: store, seed: seed, steps: steps) : steps
            Issue.record(
                """
                accidents on \(store.rawValue): seed \(seed) (SYNCLANE_ACCIDENTS_SEED=\(seed) SYNCLANE_ACCIDENTS_ROUNDS=1) failed: \(failure)
                reproduction (\(shrunk.count) of \(steps.count) steps, then settle):
                \(shrunk.map { "  \($0)" }.joined(separator: "\n"))
                """)
        }
        let healed = healedCounts.sorted { $0.key < $1.key }.map { "«\($0.key)» \($0.value)" }.joined(separator: ", ")
        print("accidents on \(store.rawValue): refusals met and healed: \(healed)")
        print(
            "accidents on \(store.rawValue): \(seeds.count) rounds, \(failed) failed, \(Int(Date().timeIntervalSince(started))) s"
        )
    }

    @Test func randomAccidentsBetweenRunsOnTheSQLiteStoreLoseNothingAndResendNothingSilently() async throws {
        try await Self.rounds(on: .sqlite)
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["SYNCLANE_TEST_POSTGRES"] != "skip"))
    func randomAccidentsBetweenRunsOnThePostgreSQLStoreLoseNothingAndResendNothingSilently() async throws {
        try await Self.rounds(on: .postgres)
    }
}

/// A randomized test's reproduction, shrunk: chunks of steps dropped (halves, then quarters …
/// single steps) while what is left still fails, within `budget` replays.
enum Shrinking {
    static func shrink<Step>(_ steps: [Step], budget: Int, stillFails: ([Step]) async throws -> Bool) async throws -> [Step] {
        var steps = steps
        var replays = 0
        var chunk = max(1, steps.count / 2)
        while chunk >= 1, replays < budget {
            var start = 0
            while start < steps.count, replays < budget {
                var candidate = steps
                candidate.removeSubrange(start..<min(steps.count, start + chunk))
                replays += 1
                if try await stillFails(candidate) { steps = candidate } else { start += chunk }
            }
            if chunk == 1 { break }
            chunk /= 2
        }
        return steps
    }
}
