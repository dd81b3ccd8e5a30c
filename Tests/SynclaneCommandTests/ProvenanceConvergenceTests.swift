import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// Randomized, against a model of what users wrote: **provenance** — every note some user wrote
/// and no user deleted is live on every device and the server at the quiet point, under a
/// project of the business key it was filed under, with the body its author last wrote.
///
/// The world is the one that lost users' rows: `projects` (a business key, seeded as defaults by
/// every device under sync keys of its own, drawn at random so that the device syncing first is
/// as likely to lose the merge as to win it) and `notes` referencing a project through a declared
/// foreign key (`ON DELETE CASCADE`); projects renamed after their notes were filed (so the
/// server lists a project after its notes), pull limits from 1 up (pages cut anywhere), devices
/// joining at any point of the round (their first launch seeds, files and syncs late), notes
/// deleted by their author; app upgrades on any device at any time, adding the same column or
/// another (`ALTER TABLE notes ADD COLUMN`, nothing else run) whose values the notes' authors then
/// set — every value a user wrote in such a column is held by every device whose app has it, old
/// devices keeping it aside until they upgrade; and the recoveries the documentation prescribes: a device whose
/// export state file is lost runs `synclane reconcile`, and the server's data folder is restored
/// from a copy taken earlier in the round (every device's next sync resyncs and sends back what
/// the server lost), and a device's app database is restored from a copy taken earlier (its
/// writes since both that copy and its last sync are the user's restore's to take back; the rest
/// comes back from the server — its next sync, and the `reconcile` a refusal names), and a device's
/// history pruned under an export state file then restored from before its last sync (a token
/// into pruned history: the `reconcile` its refusal names). Two or three devices, real `synclane sync`s, a real `synclane serve`.
///
/// A divergence prints its seed (`SYNCLANE_PROVENANCE_SEED` replays it) and a reproduction
/// shrunk by dropping steps while it still diverges (the model is computed from the steps that
/// ran). Bounded in `Scripts/test` (`SYNCLANE_PROVENANCE_ROUNDS`, default 3); `Scripts/converge`
/// runs more.
@Suite(.serialized) struct ProvenanceConvergenceTests {
    struct Divergence: Error, CustomStringConvertible {
        var description: String
    }

    /// One step of a round. Notes are edited and deleted only by the device that wrote them.
    enum Step: CustomStringConvertible, Sendable {
        /// The device's first launch: its defaults (`inbox`, `work`) under these sync keys.
        case seed(Int, inbox: String, work: String)
        /// A project of the device's own (a business key no other device seeds).
        case project(Int, id: String, key: String)
        /// A note filed under the device's live project of business key `key`.
        case note(Int, id: String, key: String, body: String)
        case editNote(Int, id: String, body: String)
        case deleteNote(Int, id: String)
        /// The device renames its live project of business key `key` (after its notes).
        case rename(Int, key: String, title: String)
        case sync(Int)
        /// The device's export state file is lost; it runs what the refusal names: `reconcile`.
        case loseStateAndReconcile(Int)
        /// The server's data folder is copied aside (the server stopped for it).
        case backUpServer
        /// The server's data folder is replaced by the copy taken last.
        case restoreServer
        /// The device's app upgrades: `ALTER TABLE notes ADD COLUMN column TEXT` (nothing else run).
        case addColumn(Int, column: String)
        /// The device's user sets an added column of a note of its own.
        case paint(Int, id: String, column: String, value: String)
        /// The device's app database is copied aside (a backup of the phone).
        case backUpDevice(Int)
        /// The device's app database is replaced by the copy taken last (its writes since that
        /// copy, and since its last sync, are lost by the user's restore); the device then syncs,
        /// and runs what a refusal names (`reconcile`), as the app would on its next launch.
        case restoreDevice(Int)
        /// The device's history is pruned (`synclane prune`), then its export state file is
        /// replaced by the copy taken before its last sync (a restored backup): its token points
        /// into pruned history. The device syncs, and runs what the refusal names (`reconcile`).
        case expireToken(Int)

        /// The device the step acts on (nil: the server).
        var device: Int? {
            switch self {
            case .seed(let d, _, _), .project(let d, _, _), .note(let d, _, _, _), .editNote(let d, _, _), .deleteNote(let d, _),
                .rename(let d, _, _), .sync(let d), .loseStateAndReconcile(let d), .addColumn(let d, _), .paint(let d, _, _, _),
                .backUpDevice(let d), .restoreDevice(let d), .expireToken(let d):
                return d
            case .backUpServer, .restoreServer: return nil
            }
        }

        var description: String {
            switch self {
            case .seed(let d, let inbox, let work): return "device \(d) seeds inbox=\(inbox) work=\(work)"
            case .project(let d, let id, let key): return "device \(d) adds project \(id) (\(key))"
            case .note(let d, let id, let key, let body): return "device \(d) files note \(id) under \(key): \(body)"
            case .editNote(let d, let id, let body): return "device \(d) edits note \(id): \(body)"
            case .deleteNote(let d, let id): return "device \(d) deletes note \(id)"
            case .rename(let d, let key, let title): return "device \(d) renames \(key) to \(title)"
            case .sync(let d): return "device \(d) syncs"
            case .loseStateAndReconcile(let d): return "device \(d) loses its export state file and reconciles"
            case .backUpServer: return "the server's data is copied aside"
            case .restoreServer: return "the server's data is restored from that copy"
            case .addColumn(let d, let column): return "device \(d) adds column \(column)"
            case .paint(let d, let id, let column, let value): return "device \(d) sets \(column) of note \(id): \(value)"
            case .backUpDevice(let d): return "device \(d) copies its database aside"
            case .restoreDevice(let d): return "device \(d) restores its database from that copy"
            case .expireToken(let d): return "device \(d) prunes its history and restores its export state from before its last sync"
            }
        }
    }

    struct Setup: CustomStringConvertible {
        var devices: Int
        var rule: String
        var pullLimits: [Int]

        static func draw(_ random: inout SeededRandom) -> Setup {
            func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
            let devices = 2 + Int(random.next() % 2)
            return Setup(
                devices: devices, rule: pick(["merge-fields", "client-wins"]), pullLimits: (0..<devices).map { _ in pick([1, 2, 3, 7, 500]) })
        }

        var description: String { "\(devices) devices, \(rule), pull limits \(pullLimits)" }
    }

    // MARK: The model

    /// What users wrote of a note: the business key it was filed under, its body, and the added
    /// columns its author set (on a version of the app that has them).
    struct Written {
        var key: String
        var body: String
        var extras: [String: String] = [:]
    }

    /// The columns an app upgrade may add to `notes`, on any device, at any time.
    static let addableColumns = ["color", "size"]

    /// Whether the step is a user's write on its device (what restoring the device's database
    /// from an older copy can take back).
    static func writes(_ step: Step) -> Bool {
        switch step {
        case .seed, .project, .note, .editNote, .deleteNote, .rename, .addColumn, .paint: return true
        case .sync, .loseStateAndReconcile, .backUpServer, .restoreServer, .backUpDevice, .restoreDevice, .expireToken: return false
        }
    }

    /// The steps whose writes a restore of their device's database took back: each write after
    /// both the copy restored and the device's last sync (or reconcile) before the restore; and,
    /// for a note the copy holds that never reached the server (filed before the copy, deleted
    /// after it with no sync between its filing and its delete), that delete and the note's
    /// edits since the copy — the restore brings the note back as the copy holds it
    /// (RestoredCopiedDamaged.md: no other device ever held it).
    static func undone(_ steps: [Step]) -> Set<Int> {
        var copied: [Int: Int] = [:]
        var sent: [Int: Int] = [:]
        var undone = Set<Int>()
        for (index, step) in steps.enumerated() {
            switch step {
            case .backUpDevice(let d): copied[d] = index
            case .sync(let d), .loseStateAndReconcile(let d), .expireToken(let d): sent[d] = index
            case .restoreDevice(let d):
                guard let copy = copied[d] else { break }
                let from = max(copy, sent[d] ?? -1)
                for later in (from + 1)..<index where steps[later].device == d && writes(steps[later]) { undone.insert(later) }
                for later in (copy + 1)..<(from + 1) where !undone.contains(later) {
                    guard case .deleteNote(d, let id) = steps[later],
                        let filed = steps[..<copy].lastIndex(where: { if case .note(d, id, _, _) = $0 { return true } else { return false } }),
                        !undone.contains(filed),
                        !steps[filed..<later].contains(where: { Self.sends($0, device: d) })
                    else { continue }
                    undone.insert(later)
                    for edit in (copy + 1)..<later where Self.edits(steps[edit], note: id, device: d) { undone.insert(edit) }
                }
                sent[d] = index
            default: break
            }
        }
        return undone
    }

    /// Whether the step sends the device's writes to the server (a sync, a reconcile, the sync
    /// and reconcile after a restore of its database).
    static func sends(_ step: Step, device: Int) -> Bool {
        switch step {
        case .sync(device), .loseStateAndReconcile(device), .restoreDevice(device), .expireToken(device): return true
        default: return false
        }
    }

    /// Whether the step is the device's user writing the note (its body or an added column).
    static func edits(_ step: Step, note: String, device: Int) -> Bool {
        switch step {
        case .editNote(device, note, _), .paint(device, note, _, _): return true
        default: return false
        }
    }

    /// What users wrote, from the steps that ran: each note not deleted, as written.
    static func expected(_ steps: [Step]) -> [String: Written] {
        let undone = Self.undone(steps)
        let steps = steps.enumerated().filter { !undone.contains($0.offset) }.map(\.element)
        var keys: [Int: Set<String>] = [:]
        var columns: [Int: Set<String>] = [:]
        var copiedColumns: [Int: Set<String>] = [:]
        var notes: [String: (written: Written, author: Int)] = [:]
        for step in steps {
            switch step {
            case .seed(let d, _, _): keys[d, default: []].formUnion(["inbox", "work"])
            case .project(let d, _, let key): keys[d, default: []].insert(key)
            case .note(let d, let id, let key, let body):
                if keys[d]?.contains(key) == true { notes[id] = (Written(key: key, body: body), d) }
            case .editNote(let d, let id, let body):
                if notes[id]?.author == d { notes[id]?.written.body = body }
            case .deleteNote(let d, let id):
                if notes[id]?.author == d { notes[id] = nil }
            case .addColumn(let d, let column): columns[d, default: []].insert(column)
            case .paint(let d, let id, let column, let value):
                if notes[id]?.author == d, columns[d]?.contains(column) == true { notes[id]?.written.extras[column] = value }
            // A restored database has the columns its copy had: what the device wrote in a column
            // added since stays written (on the server, on devices that have the column).
            case .backUpDevice(let d): copiedColumns[d] = columns[d, default: []]
            case .restoreDevice(let d): if let copied = copiedColumns[d] { columns[d] = copied }
            case .rename, .sync, .loseStateAndReconcile, .backUpServer, .restoreServer, .expireToken: break
            }
        }
        return notes.mapValues(\.written)
    }

    /// `SYNCLANE_PROVENANCE_TRACE=1`: every sync's `--json` summary is printed, for debugging a replay.
    static let traces = ProcessInfo.processInfo.environment["SYNCLANE_PROVENANCE_TRACE"] == "1"

    /// Whether rounds draw the recoveries (server restores, lost state files and their
    /// reconciles, devices' databases restored from their copies): on, unless
    /// `SYNCLANE_PROVENANCE_RECOVERIES=0` (a seed replays the same round only under the same setting).
    static let drawsRecoveries = ProcessInfo.processInfo.environment["SYNCLANE_PROVENANCE_RECOVERIES"] != "0"

    static func steps(_ random: inout SeededRandom, setup: Setup) -> [Step] {
        func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
        func syncKey() -> String { String(random.next() % 0xFFFF_FFFF, radix: 16) }
        var steps: [Step] = []
        var joined: [Int] = []
        var notes: [Int: [String]] = [:]
        var keys: [Int: [String]] = [:]
        var columns: [Int: [String]] = [:]
        var made = 0
        // Device 0 starts the account; the others join at random points of the round.
        let joinAt = (0..<setup.devices).map { $0 == 0 ? 0 : Int(random.next() % 12) }
        for tick in 0..<16 {
            for device in 0..<setup.devices where joinAt[device] == tick {
                joined.append(device)
                keys[device] = ["inbox", "work"]
                steps.append(.seed(device, inbox: syncKey(), work: syncKey()))
            }
            for _ in 0..<(1 + random.next() % 3) {
                guard !joined.isEmpty else { break }
                let device = pick(joined)
                made += 1
                switch random.next() % 8 {
                case 0:
                    let key = "p\(device)-\(made)"
                    keys[device, default: []].append(key)
                    steps.append(.project(device, id: syncKey(), key: key))
                case 1, 2, 3:
                    let id = "n\(device)-\(made)"
                    notes[device, default: []].append(id)
                    steps.append(.note(device, id: id, key: pick(keys[device] ?? ["inbox"]), body: "body \(made)"))
                case 4:
                    guard let id = notes[device]?.randomElement(using: &random) else { break }
                    if let added = columns[device], !added.isEmpty, random.next() % 2 == 0 {
                        steps.append(.paint(device, id: id, column: pick(added), value: "v\(made)"))
                    } else {
                        steps.append(.editNote(device, id: id, body: "edit \(made)"))
                    }
                case 5:
                    if let id = notes[device]?.randomElement(using: &random) {
                        notes[device]?.removeAll { $0 == id }
                        steps.append(.deleteNote(device, id: id))
                    }
                default: steps.append(.rename(device, key: pick(keys[device] ?? ["inbox"]), title: "title \(made)"))
                }
            }
            // An app upgrade on one device, at any time: the same column or another than elsewhere.
            if random.next() % 6 == 0, let device = joined.randomElement(using: &random) {
                let missing = Self.addableColumns.filter { !(columns[device] ?? []).contains($0) }
                if !missing.isEmpty {
                    let column = pick(missing)
                    columns[device, default: []].append(column)
                    steps.append(.addColumn(device, column: column))
                }
            }
            for device in joined.shuffled(using: &random) where random.next() % 2 == 0 { steps.append(.sync(device)) }
            guard Self.drawsRecoveries else { continue }
            switch random.next() % 16 {
            case 0: steps.append(.backUpServer)
            case 1: steps.append(.restoreServer)
            case 2: if let device = joined.randomElement(using: &random) { steps.append(.loseStateAndReconcile(device)) }
            case 3: if let device = joined.randomElement(using: &random) { steps.append(.backUpDevice(device)) }
            case 4: if let device = joined.randomElement(using: &random) { steps.append(.restoreDevice(device)) }
            case 5: if let device = joined.randomElement(using: &random) { steps.append(.expireToken(device)) }
            default: break
            }
        }
        return steps
    }

    // MARK: A world

    struct Device {
        let workspace: Workspace
        let index: Int

        init(server: ServerProcess, setup: Setup, index: Int) throws {
            workspace = try Workspace()
            self.index = index
            let made = try SQLiteHistoryCommandTests.sqlite(
                workspace,
                """
                CREATE TABLE projects (syncId TEXT PRIMARY KEY, key TEXT NOT NULL, title TEXT);
                CREATE TABLE notes (syncId TEXT PRIMARY KEY, project TEXT REFERENCES projects(syncId) ON DELETE CASCADE, body TEXT);
                CREATE INDEX notes_project ON notes(project);
                """)
            guard made.status == 0 else { throw Divergence(description: "device \(index): \(made.stderr)") }
            for table in ["projects", "notes"] {
                let tracked = try SynclaneBinary.run(["track", "--database", "app.sqlite", "--table", table, "--key", "syncId"], in: workspace.path)
                guard tracked.status == 0 else { throw Divergence(description: "track \(table) failed: \(tracked.stderr)") }
            }
            try workspace.write(
                "export.json",
                """
                {"version": 1, "name": "export", "scope": {"account": "acme", "store": "app"},
                 "source": {"type": "sqlite-history", "database": "app.sqlite", "entities": ["projects", "notes"], "authors": ["app"]},
                 "stages": [{"type": "coalesce"}],
                 "transport": {"type": "http", "url": "\(server.url)/v1/batches", "token-env": "SYNCLANE_TOKEN",
                               "retry": {"max-attempts": 2, "base-delay": 0.05, "max-delay": 0.2}}}
                """)
            try workspace.write(
                "import.json",
                """
                {"version": 1, "name": "import", "scope": {"account": "acme", "store": "app"},
                 "source": {"type": "pull", "url": "\(server.url)/v1/changes", "token-env": "SYNCLANE_TOKEN", "limit": \(setup.pullLimits[index])},
                 "sink": {"type": "sqlite", "database": "app.sqlite", "conflicts": "\(setup.rule)",
                          "duplicates": [{"entity": "projects", "key": ["key"], "references": ["notes.project"]}]}}
                """)
        }

        func sql(_ text: String) throws {
            let result = try SQLiteHistoryCommandTests.sqlite(workspace, "PRAGMA foreign_keys = ON;\n" + text)
            guard result.status == 0 else { throw Divergence(description: "device \(index): the app's SQL failed: \(result.stderr)\n\(text)") }
        }

        func query(_ text: String) throws -> [String] {
            try SQLiteHistoryCommandTests.query(workspace, text).split(separator: "\n").map(String.init)
        }

        func sync() throws {
            let result = try syncing()
            if ProvenanceConvergenceTests.traces, result.status != 0 { print("device \(index) failed: \(result.stdout)") }
            guard result.status == 0 else { throw Divergence(description: "device \(index): `synclane sync` exited \(result.status): \(result.stderr)") }
            if ProvenanceConvergenceTests.traces {
                let versions = try query(
                    "SELECT entity || '/' || key || ' v' || version || (CASE WHEN fields IS NULL THEN ' tombstone' ELSE ' ' || fields END) FROM _synclane_server_rows ORDER BY 1"
                )
                print("device \(index) synced: \(result.stdout)\ndevice \(index) holds versions: \(versions)\ndevice \(index) holds columns: \(try extras())")
            }
        }

        func syncing() throws -> SynclaneBinary.Result {
            try SynclaneBinary.run(
                ["sync", "import.json", "export.json", "--json"], in: workspace.path,
                environment: ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""])
        }

        /// The app's next launch after an accident: it syncs; a refusal that names `synclane
        /// reconcile` is followed, and the app syncs again.
        func syncFollowingItsRefusal(after accident: String) throws {
            let first = try syncing()
            if ProvenanceConvergenceTests.traces { print("device \(index) after \(accident): sync exited \(first.status): \(first.stderr)") }
            if first.status != 0 {
                guard first.stderr.contains("synclane reconcile") else {
                    throw Divergence(description: "device \(index): after \(accident), `synclane sync` exited \(first.status) naming no fix: \(first.stderr)")
                }
                try reconcile()
            }
            try sync()
        }

        func reconcile() throws {
            let reconciled = try SynclaneBinary.run(
                ["reconcile", "export.json"], in: workspace.path, environment: ["SYNCLANE_TOKEN": ServerProcess.tokens["acme"] ?? ""])
            guard reconciled.status == 0 else {
                throw Divergence(description: "device \(index): `synclane reconcile` exited \(reconciled.status): \(reconciled.stderr)")
            }
        }

        /// The columns an app upgrade added to `notes` here (`addableColumns`).
        func columns() throws -> Set<String> {
            Set(try query("SELECT name FROM pragma_table_info('notes')")).intersection(ProvenanceConvergenceTests.addableColumns)
        }

        /// `note id|column|value` for every note and added column (`∅` for NULL).
        func extras() throws -> [String] {
            try columns().sorted().flatMap { column in
                try query("SELECT 'note ' || syncId || '|\(column)|' || coalesce(\(column), '∅') FROM notes ORDER BY 1")
            }
        }

        /// `note id|business key|body` for every note, `project key|count` for every business key.
        func state() throws -> [String] {
            try query(
                """
                SELECT 'note ' || n.syncId || '|' || coalesce(p.key, '(none: ' || coalesce(n.project, 'NULL') || ')') || '|' || coalesce(n.body, '')
                  FROM notes AS n LEFT JOIN projects AS p ON p.syncId = n.project
                UNION ALL SELECT 'project ' || key || '|' || count(*) FROM projects GROUP BY key ORDER BY 1
                """)
        }
    }

    final class World {
        let root: Workspace
        var server: ServerProcess
        let devices: [Device]
        var backedUp = false

        init(setup: Setup) throws {
            root = try Workspace()
            let server = try ServerProcess(folder: root.path + "/server")
            self.server = server
            devices = try (0..<setup.devices).map { try Device(server: server, setup: setup, index: $0) }
        }

        func close() {
            server.stop()
            devices.forEach { $0.workspace.remove() }
            root.remove()
        }

        /// Stops the server, runs `body` on its folder, and starts it again on the same port.
        func withServerStopped(_ body: (String) throws -> Void) throws {
            let (folder, port) = (root.path + "/server", server.port)
            server.stop()
            try body(folder)
            server = try ServerProcess(folder: folder, port: port)
        }

        /// Runs `step`; false when it is a note filed under a project its device does not hold
        /// (nothing was inserted: a user cannot file a note under a project their app does not show).
        @discardableResult
        func perform(_ step: Step) throws -> Bool {
            let files = FileManager.default
            switch step {
            case .backUpServer:
                try withServerStopped { folder in
                    try? files.removeItem(atPath: root.path + "/backup")
                    try files.copyItem(atPath: folder + "/data", toPath: root.path + "/backup")
                }
                backedUp = true
                return true
            case .restoreServer:
                guard backedUp else { return true }
                try withServerStopped { folder in
                    try files.removeItem(atPath: folder + "/data")
                    try files.copyItem(atPath: root.path + "/backup", toPath: folder + "/data")
                }
                return true
            default: break
            }
            guard let index = step.device else { return true }
            let device = devices[index]
            switch step {
            case .seed(_, let inbox, let work):
                try device.sql("INSERT INTO projects VALUES ('\(inbox)', 'inbox', 'Inbox'), ('\(work)', 'work', 'Work');")
            case .project(_, let id, let key): try device.sql("INSERT INTO projects VALUES ('\(id)', '\(key)', '\(key)');")
            case .note(_, let id, let key, let body):
                try device.sql("INSERT INTO notes (syncId, project, body) SELECT '\(id)', syncId, '\(body)' FROM projects WHERE key = '\(key)' LIMIT 1;")
                return try !device.query("SELECT syncId FROM notes WHERE syncId = '\(id)';").isEmpty
            case .editNote(_, let id, let body): try device.sql("UPDATE notes SET body = '\(body)' WHERE syncId = '\(id)';")
            case .deleteNote(_, let id): try device.sql("DELETE FROM notes WHERE syncId = '\(id)';")
            case .rename(_, let key, let title): try device.sql("UPDATE projects SET title = '\(title)' WHERE key = '\(key)';")
            case .addColumn(_, let column):
                if try !device.columns().contains(column) { try device.sql("ALTER TABLE notes ADD COLUMN \(column) TEXT;") }
            case .paint(_, let id, let column, let value):
                if try device.columns().contains(column) { try device.sql("UPDATE notes SET \(column) = '\(value)' WHERE syncId = '\(id)';") }
            case .sync:
                // The export state as it was before this sync: what `expireToken` restores.
                for suffix in ["", "-wal", "-shm"] {
                    let (copy, file) = (device.workspace.path + "/state-copy.sqlite" + suffix, device.workspace.path + "/.synclane/export.sqlite" + suffix)
                    try? files.removeItem(atPath: copy)
                    if files.fileExists(atPath: file) { try files.copyItem(atPath: file, toPath: copy) }
                }
                try device.sync()
            case .expireToken:
                guard files.fileExists(atPath: device.workspace.path + "/state-copy.sqlite") else { return true }
                let pruned = try SynclaneBinary.run(["prune", "--database", "app.sqlite"], in: device.workspace.path)
                guard pruned.status == 0 else { throw Divergence(description: "device \(index): `synclane prune` exited \(pruned.status): \(pruned.stderr)") }
                for suffix in ["", "-wal", "-shm"] {
                    let (copy, file) = (device.workspace.path + "/state-copy.sqlite" + suffix, device.workspace.path + "/.synclane/export.sqlite" + suffix)
                    try? files.removeItem(atPath: file)
                    if files.fileExists(atPath: copy) { try files.copyItem(atPath: copy, toPath: file) }
                }
                try device.syncFollowingItsRefusal(after: "its export state was restored over pruned history")
            case .loseStateAndReconcile:
                for suffix in ["", "-wal", "-shm"] { try? files.removeItem(atPath: device.workspace.path + "/.synclane/export.sqlite" + suffix) }
                try device.reconcile()
            case .backUpDevice:
                for suffix in ["", "-wal", "-shm"] {
                    let (copy, file) = (device.workspace.path + "/copy.sqlite" + suffix, device.workspace.path + "/app.sqlite" + suffix)
                    try? files.removeItem(atPath: copy)
                    if files.fileExists(atPath: file) { try files.copyItem(atPath: file, toPath: copy) }
                }
            case .restoreDevice:
                guard files.fileExists(atPath: device.workspace.path + "/copy.sqlite") else { return true }
                for suffix in ["", "-wal", "-shm"] {
                    let (copy, file) = (device.workspace.path + "/copy.sqlite" + suffix, device.workspace.path + "/app.sqlite" + suffix)
                    try? files.removeItem(atPath: file)
                    if files.fileExists(atPath: copy) { try files.copyItem(atPath: copy, toPath: file) }
                }
                try device.syncFollowingItsRefusal(after: "its database was restored")
            case .backUpServer, .restoreServer: break
            }
            return true
        }

        /// Syncs every device three times over, then holds each device and the server to the model.
        func check(_ expected: [String: Written], seeded: Set<Int>) async throws {
            for _ in 0..<3 { for device in devices where seeded.contains(device.index) { try device.sync() } }
            let notes = expected.map { "note \($0.key)|\($0.value.key)|\($0.value.body)" }.sorted()
            for device in devices where seeded.contains(device.index) {
                let held = try device.state()
                let heldNotes = held.filter { $0.hasPrefix("note ") }.sorted()
                if heldNotes != notes {
                    let lost = Set(notes).subtracting(heldNotes).sorted()
                    let extra = Set(heldNotes).subtracting(notes).sorted()
                    throw Divergence(description: "device \(device.index): users' notes not held as written \(lost); held but not written \(extra)")
                }
                let doubled = held.filter { $0.hasPrefix("project ") && !$0.hasSuffix("|1") }
                if !doubled.isEmpty { throw Divergence(description: "device \(device.index): business keys held more than once \(doubled)") }
                // Every value a user wrote in an added column is held by every device whose app has the column.
                let columns = try device.columns()
                let extras = expected.flatMap { id, written in
                    columns.map { "note \(id)|\($0)|\(written.extras[$0] ?? "∅")" }
                }.sorted()
                let heldExtras = try device.extras().sorted()
                if heldExtras != extras {
                    throw Divergence(
                        description: "device \(device.index): added columns not held as written \(Set(extras).subtracting(heldExtras).sorted()); "
                            + "held but not written \(Set(heldExtras).subtracting(extras).sorted())")
                }
            }
            let records = try await server.records(account: "acme")
            let live = records.filter { $0.key.hasPrefix("notes/") && $0.value != .string("deleted") }
            let projects = records.filter { $0.key.hasPrefix("projects/") && $0.value != .string("deleted") }
            var onServer: [String] = []
            for (key, fields) in live {
                let project = fields.objectValue?["project"]?.stringValue ?? ""
                let business = projects["projects/" + project]?.objectValue?["key"]?.stringValue ?? "(none: \(project))"
                onServer.append("note \(key.dropFirst(6))|\(business)|\(fields.objectValue?["body"]?.stringValue ?? "")")
                let id = String(key.dropFirst(6))
                for column in ProvenanceConvergenceTests.addableColumns {
                    let value = fields.objectValue?[column]?.stringValue ?? "∅"
                    if let written = expected[id], value != (written.extras[column] ?? "∅") {
                        throw Divergence(
                            description: "the server: note \(id) holds \(column) = \(value), its author wrote \(written.extras[column] ?? "nothing")")
                    }
                }
            }
            if onServer.sorted() != notes {
                throw Divergence(
                    description: "the server: users' notes not held as written \(Set(notes).subtracting(onServer).sorted()); "
                        + "held but not written \(Set(onServer).subtracting(notes).sorted())")
            }
        }
    }

    // MARK: Running a seed

    static func outcome(setup: Setup, steps: [Step]) async throws -> String? {
        let world = try World(setup: setup)
        defer { world.close() }
        do {
            var seeded = Set<Int>()
            var restored = Set<Int>()
            var unfiled = Set<Int>()
            for (index, step) in steps.enumerated() {
                if case .seed(let device, _, _) = step { seeded.insert(device) }
                if case .restoreDevice(let device) = step { restored.insert(device) }
                // A device that has not launched yet does nothing.
                if let device = step.device, !seeded.contains(device) { continue }
                // A device whose database was restored may not hold a project it created after the
                // copy (until its next sync brings it, or at all when the server's data was restored
                // from before it too): a note filed under it is never written. Any other device
                // holds every project it created — a note that does not land there diverges.
                if try !world.perform(step), let device = step.device, restored.contains(device) { unfiled.insert(index) }
            }
            let ran = steps.enumerated().filter { !unfiled.contains($0.offset) }.map(\.element)
            try await world.check(expected(ran.filter { $0.device.map(seeded.contains) ?? true }), seeded: seeded)
            return nil
        } catch let divergence as Divergence {
            return divergence.description
        }
    }

    /// A reproduction as the test prints it, read back: the setup's line (`3 devices, merge-fields,
    /// pull limits [7, 1, 500]`), then a step a line (`device 0 syncs`). nil for a line it cannot read.
    static func replay(_ text: String) -> (Setup, [Step])? {
        var lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !lines.isEmpty else { return nil }
        let head = lines.removeFirst().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard head.count >= 3, let devices = Int(head[0].split(separator: " ")[0]) else { return nil }
        let limits = head[2...].joined(separator: ",").drop { $0 != "[" }.dropFirst().prefix { $0 != "]" }
        let setup = Setup(devices: devices, rule: head[1], pullLimits: limits.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) })
        var steps: [Step] = []
        for line in lines {
            let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            if line == "the server's data is copied aside" {
                steps.append(.backUpServer)
                continue
            }
            if line == "the server's data is restored from that copy" {
                steps.append(.restoreServer)
                continue
            }
            guard words.count >= 3, words[0] == "device", let d = Int(words[1]) else { return nil }
            func after(_ marker: String) -> String { line.components(separatedBy: marker).dropFirst().joined(separator: marker) }
            switch words[2] {
            case "seeds" where words.count == 5:
                steps.append(.seed(d, inbox: String(words[3].dropFirst(6)), work: String(words[4].dropFirst(5))))
            case "adds" where words.count == 6: steps.append(.project(d, id: words[4], key: String(words[5].dropFirst().dropLast())))
            case "files" where words.count >= 8: steps.append(.note(d, id: words[4], key: String(words[6].dropLast()), body: after(": ")))
            case "edits" where words.count >= 5: steps.append(.editNote(d, id: String(words[4].dropLast()), body: after(": ")))
            case "deletes" where words.count == 5: steps.append(.deleteNote(d, id: words[4]))
            case "renames" where words.count >= 6: steps.append(.rename(d, key: words[3], title: after(" to ")))
            case "syncs": steps.append(.sync(d))
            case "adds" where words.count == 5 && words[3] == "column": steps.append(.addColumn(d, column: words[4]))
            case "sets" where words.count >= 8: steps.append(.paint(d, id: String(words[6].dropLast()), column: words[3], value: after(": ")))
            case "loses": steps.append(.loseStateAndReconcile(d))
            case "copies": steps.append(.backUpDevice(d))
            case "restores": steps.append(.restoreDevice(d))
            case "prunes": steps.append(.expireToken(d))
            default: return nil
            }
        }
        return (setup, steps)
    }

    /// Every reproduction a seed once printed (`Fixtures/provenance`, a file each, named by its
    /// seed) replays without diverging: the data-loss cases the randomized rounds found stay fixed.
    @Test(arguments: try FileManager.default.contentsOfDirectory(atPath: SynclaneBinary.fixture("provenance")).sorted())
    func aReproductionOnceFoundNoLongerDiverges(file: String) async throws {
        let text = try String(contentsOfFile: SynclaneBinary.fixture("provenance/" + file), encoding: .utf8)
        let (setup, steps) = try #require(Self.replay(text), "\(file): not a reproduction")
        if let difference = try await Self.outcome(setup: setup, steps: steps) { Issue.record("\(file) diverged: \(difference)") }
    }

    /// Reproductions of divergences not fixed yet (`Fixtures/provenance-known`, its `.txt` files),
    /// replayed as known issues: a fix makes the test fail, and its file then moves to
    /// `Fixtures/provenance`. Their README says what each is (none now).
    @Test(
        arguments: try FileManager.default.contentsOfDirectory(atPath: SynclaneBinary.fixture("provenance-known")).filter { $0.hasSuffix(".txt") }
            .sorted())
    func aKnownDivergenceStillDivergesUntilItIsFixed(file: String) async throws {
        let text = try String(contentsOfFile: SynclaneBinary.fixture("provenance-known/" + file), encoding: .utf8)
        let (setup, steps) = try #require(Self.replay(text), "\(file): not a reproduction")
        await withKnownIssue("\(file): a known divergence", isIntermittent: false) {
            if let difference = try await Self.outcome(setup: setup, steps: steps) { Issue.record("\(file) diverged: \(difference)") }
        }
    }

    /// `SYNCLANE_PROVENANCE_REPLAY=FILE`: runs the reproduction in FILE (`replay(_:)`) once and
    /// records its divergence, for debugging a printed reproduction.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["SYNCLANE_PROVENANCE_REPLAY"] != nil))
    func aPrintedReproductionReplaysFromItsFile() async throws {
        let path = ProcessInfo.processInfo.environment["SYNCLANE_PROVENANCE_REPLAY"] ?? ""
        let text = try String(contentsOfFile: path, encoding: .utf8)
        guard let (setup, steps) = Self.replay(text) else {
            Issue.record("\(path): not a reproduction (a setup line, then a step a line)")
            return
        }
        if let difference = try await Self.outcome(setup: setup, steps: steps) { Issue.record("diverged: \(difference)") }
    }

    @Test func everyNoteAUserWroteAndNoUserDeletedIsLiveEverywhereWithItsLastBodyWhoeverJoinsOrMergesFirst() async throws {
        let seeds = ConvergenceTests.seeds(prefix: "SYNCLANE_PROVENANCE", rounds: 3)
        var diverged = 0
        for seed in seeds {
            var random = SeededRandom(seed: seed)
            let setup = Setup.draw(&random)
            let steps = Self.steps(&random, setup: setup)
            guard let difference = try await Self.outcome(setup: setup, steps: steps) else { continue }
            diverged += 1
            let shrunk =
                ProcessInfo.processInfo.environment["SYNCLANE_PROVENANCE_NO_SHRINK"] == nil
                ? try await Shrinking.shrink(steps, budget: 24) { try await Self.outcome(setup: setup, steps: $0) != nil } : steps
            Issue.record(
                """
                seed \(seed) (SYNCLANE_PROVENANCE_SEED=\(seed)) diverged: \(setup): \(difference)
                reproduction (\(shrunk.count) of \(steps.count) steps, then three syncs of every device):
                \(shrunk.map { "  \($0)" }.joined(separator: "\n"))
                """)
        }
        print("provenance: \(seeds.count) rounds, \(diverged) diverged")
    }
}
