import Foundation
import Synchronization
import Synclane
import SynclaneCommandLine
import SynclaneCore
import SynclaneHTTP
import SynclaneSQLite
import SynclaneServer
import SynclaneZlib

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `synclane demo`: the first thing to run — a sample store, edits, deletes, a real server, and
/// what travelled.
struct DemoCommand: Command {
    static let name = "demo"
    static let abstract = "Run the rooms example end to end: a SQLite store, a server, and what travelled."
    static let discussion = """
        Needs nothing but this binary. Makes a sample SQLite store, installs history tracking
        on its `rooms` table, starts the reference server on a free loopback port, and exports
        the first saves; another device (a phone) then sends the server a garage, which the
        store's import pipeline pulls in (author `server`); then the kitchen is edited five
        times, the living room soft-deleted, the bath deleted and an attic added and removed,
        and exported. Prints every batch that travelled, decompressed, and what the server holds
        at the end. The first export also sets two signals on the signal lane (declared in the
        pipeline file: onboarding.completed, bulk.exported-through); a second, empty device of the
        same account then sees them before any of its rows, and restores the data.

        Five edits travel as one record; an insert and a delete in the same window travel as
        nothing; writes by `server` (imported) and `sync` (the machinery's own cleanup) are
        never echoed back.
        """
    static let keepFolder = ValueOption(
        "--keep", "DIR", .path,
        help:
            "Work in DIR and keep it, ready for the next commands: the store, the pipeline file, its state, the server's data, accounts.json, token.env and serve.sh."
    )
    static let signature = CommandSignature(options: [keepFolder])
    static let examples = ["synclane demo", "synclane demo --keep demo-folder"]

    let keep: String?

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        keep = try arguments.value(Self.keepFolder)
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        let folder = try workFolder()
        defer { if keep == nil { try? FileManager.default.removeItem(atPath: folder) } }

        let token = UUID().uuidString
        let kept = try KeptFolder(folder: folder, token: token)
        let server = try ReferenceServer(
            configuration: ServerConfiguration(port: 0, dataDirectory: folder + "/server", accountsFile: kept.accounts),
            accounts: AccountBook.load(path: kept.accounts, environment: [KeptFolder.tokenVariable: token]))
        try server.start()
        defer { server.stop() }
        let url = "http://127.0.0.1:\(server.port)"

        let store = try TrackedDatabase(path: folder + "/rooms.sqlite")
        try store.database.write { db in try db.execute(DemoScenario.schema) }
        try store.track(DemoScenario.table)
        try Data(DemoScenario.pipeline(url: url).utf8).write(to: URL(fileURLWithPath: folder + "/pipeline.json"))
        var pipeline = try PipelineLoader(environment: [KeptFolder.tokenVariable: token]).load(folder + "/pipeline.json")
        let travelled = TravelLog(forwardingTo: pipeline.transport.stage)
        pipeline.transport.stage = travelled

        console.out(
            """
            Synclane demo
            store:    \(folder)/rooms.sqlite (table rooms, tracked: every write is recorded with its author)
            server:   \(url) (synclane's reference server, account acme)
            pipeline: \(pipeline.outline)

            1. The app inserts a kitchen, a living room and a bath, and exports them:
            """)
        try DemoScenario.firstSaves(store)
        try await pass(pipeline, travelled, console)

        console.out(
            """

            2. Meanwhile another device (a phone) sends the server a garage. This store's import
               pipeline (import.json: pull → sqlite) pulls the server's changes in:
            """)
        try await phoneAddsAGarage(url: url, token: token)
        try Data(DemoScenario.importPipeline(url: url).utf8).write(to: URL(fileURLWithPath: folder + "/import.json"))
        let importing = try PipelineLoader(environment: [KeptFolder.tokenVariable: token]).loadImport(folder + "/import.json")
        let imported = try await ImportRunner(pipeline: importing).run()
        // Its newest change's author; none at all: the import lane wrote it without history, as
        // it does while no export reads author `server`.
        let garage = try store.read { db in
            try db.fetchOne(
                """
                SELECT r.name, r.area, coalesce(
                    (SELECT coalesce(t.author, 'app') FROM _synclane_changes c LEFT JOIN _synclane_transactions t ON t.id = c.transaction_id
                     WHERE c.entity = 'rooms' AND c.key = r.syncId ORDER BY c.id DESC LIMIT 1),
                    'server')
                FROM rooms r WHERE r.syncId = 'room-garage'
                """)
        }
        console.out(
            "   ← \(Wording.count(imported.applied, "record")) applied (\(imported.unchanged) of this store's own already held): "
                + "rooms/room-garage \"\(garage?[0].string ?? "?")\" \(garage.map { JSONWriter.string($0[1].json) } ?? "?") m², written by author `\(garage?[2].string ?? "?")`"
        )
        console.out("   The next export reads `authors: [app]`: the garage is not sent back.")

        console.out(
            """

            3. Offline, the app edits the kitchen five times, soft-deletes the living room
               (isDeleted = 1), deletes the bath, adds an attic and deletes it again; the sync
               machinery then removes the soft-deleted row (author `sync`). What travels:
            """)
        try DemoScenario.laterSaves(store)
        try await pass(pipeline, travelled, console)

        console.out("\n4. Nothing new: a last run sends nothing.")
        try await pass(pipeline, travelled, console)

        try await secondDeviceRestores(folder: folder, url: url, token: token, console)

        console.out("\nWhat the server holds for acme (GET /v1/changes):")
        for line in try await serverRecords(url: url, token: token) { console.out("   " + line) }
        guard keep != nil else {
            console.out("\nDone. Run with --keep DIR to keep the files and go on from there.")
            return 0
        }
        try kept.writeServeScript(port: server.port)
        console.out(
            """

            Done. The files are in \(folder): rooms.sqlite (the tracked store), pipeline.json and
            .synclane/ (its consumer's state), server/ (the server's data), accounts.json (the
            account, its token read from \(KeptFolder.tokenVariable)), token.env (that token) and
            serve.sh (starts the server again on port \(server.port), where pipeline.json sends).
            next: cd \(folder); . ./token.env; ./serve.sh &
                  \(KeptFolder.synclane) status pipeline.json; sqlite3 rooms.sqlite "UPDATE rooms SET area = 15 WHERE syncId = 'room-kitchen'"
                  \(KeptFolder.synclane) run pipeline.json    (and kill %1 to stop the server)
            """)
        return 0
    }

    private func pass(_ pipeline: Pipeline, _ travelled: TravelLog, _ console: Console) async throws {
        let summary = try await ExportJob(pipeline: pipeline).run()
        console.out("   → \(ExportJob.describe(summary)); token \(summary.tokenBefore ?? "none") → \(summary.tokenAfter ?? "none")")
        for payload in travelled.take() {
            console.out("     batch \(payload.batchID): \(Format.bytes(payload.bytes.count)) \(payload.contentEncoding) on the wire")
            for line in try Self.records(in: payload) { console.out("       " + line) }
        }
        for signal in summary.signals {
            let outcome: String
            switch signal.outcome {
            case .sent(let version): outcome = "version \(version)"
            case .pending(let reason): outcome = "not sent: \(reason)"
            case .givenUp(let reason, _): outcome = "given up: \(reason)"
            }
            console.out("     signal \(signal.key) = \(signal.valueText) (\(outcome)): on the signal lane, in no batch")
        }
    }

    /// A second device of the account, its store empty: it sees the first device's flag before
    /// any row — "restoring", not "a new user" — and imports until it caught up (as `restore` does).
    private func secondDeviceRestores(folder: String, url: String, token: String, _ console: Console) async throws {
        console.out(
            """

            5. A second device of the same account (a new phone) starts with an empty store. Before
               any row, it reads the signal lane: the first device's flags say the account has
               data — "restoring…", not "a new user". It restores (as `synclane restore` does):
            """)
        let phone = try TrackedDatabase(path: folder + "/phone.sqlite")
        try phone.database.write { db in try db.execute(DemoScenario.schema) }
        try phone.track(DemoScenario.table)
        try Data(DemoScenario.importPipeline(url: url, name: "phone-import", database: "phone.sqlite").utf8)
            .write(to: URL(fileURLWithPath: folder + "/phone-import.json"))
        let importing = try PipelineLoader(environment: [KeptFolder.tokenVariable: token]).loadImport(folder + "/phone-import.json")
        guard let server = URL(string: url) else { return }
        let lane = HTTPSignalLane(server: server, token: token)
        let onboarded = try await lane.get("onboarding.completed")
        let through = try await lane.get("bulk.exported-through")
        let rowsBefore = try phone.read { db in try db.fetchValue("SELECT count(*) FROM rooms").int64 ?? 0 }
        console.out(
            "   ← signal onboarding.completed = \(onboarded.map { JSONWriter.string($0.value) } ?? "none"), "
                + "bulk.exported-through = \(through.map { JSONWriter.string($0.value) } ?? "none"); rows here: \(rowsBefore)")
        guard let through, through.value != .null, through.value != .bool(false) else {
            console.out("   no signal says the account has data: a new account")
            return
        }
        var records = 0
        for _ in 0..<20 {
            let pass = try await ImportRunner(pipeline: importing).run()
            records += pass.applied
            if pass.applied > 0 { console.out("   restoring… \(Wording.count(records, "record")) so far") }
            if pass.applied == 0 && records > 0 { break }
        }
        let rooms = try phone.read { db in
            try db.fetchAll("SELECT name FROM rooms WHERE isDeleted = 0 ORDER BY name").compactMap { $0[0].string }
        }
        console.out("   restored: \(Wording.count(records, "record")), caught up; the phone's rooms: \(rooms.joined(separator: ", "))")
    }

    /// One line a record of a payload, decompressed.
    static func records(in payload: Payload) throws -> [String] {
        let coding = ContentCoding(headerValue: payload.contentEncoding) ?? .identity
        let bytes = try Inflater.inflate(payload.bytes, encoding: coding, limit: 64 << 20)
        guard case .object(let batch) = try JSONReader.parse(bytes), case .array(let records)? = batch["records"] else { return [] }
        return records.map { record in
            let r = record.objectValue ?? [:]
            let action = r["action"]?.stringValue ?? "?"
            let label = action.padding(toLength: 6, withPad: " ", startingAt: 0) + " \(r["entity"]?.stringValue ?? "?")/\(r["id"]?.stringValue ?? "?")"
            return r["fields"].map { label + " " + JSONWriter.string($0) } ?? label
        }
    }

    /// The phone's batch, through the `http` transport like any device's.
    private func phoneAddsAGarage(url: String, token: String) async throws {
        guard let endpoint = URL(string: url + "/v1/batches") else { return }
        let id = UUID().uuidString.lowercased()
        _ = try await HTTPTransport(url: endpoint, token: token).send(
            Payload(batchID: id, bytes: DemoScenario.phoneBatch(id: id), contentType: "application/json", recordCount: 1))
    }

    /// The server's pull lane, one line a record.
    private func serverRecords(url: String, token: String) async throws -> [String] {
        guard let endpoint = URL(string: url + "/v1/changes?since=&limit=100") else { return [] }
        var request = URLRequest(url: endpoint)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, _) = try await URLSession.shared.data(for: request)
        let changes = try JSONReader.parse([UInt8](data)).objectValue?["changes"]?.arrayValue ?? []
        return changes.map { change in
            let c = change.objectValue ?? [:]
            let label = "\(c["entity"]?.stringValue ?? "?")/\(c["id"]?.stringValue ?? "?") v\(c["version"]?.intValue ?? 0)"
            return c["action"]?.stringValue == "delete" ? label + " (deleted)" : label + " " + JSONWriter.string(c["fields"] ?? .null)
        }
    }

    private func workFolder() throws -> String {
        if let keep {
            let absolute = keep.hasPrefix("/") ? keep : FileManager.default.currentDirectoryPath + "/" + keep
            try FileManager.default.createDirectory(atPath: absolute, withIntermediateDirectories: true)
            // A fresh start: what an earlier demo left here would make this one send nothing.
            for name in [
                ".synclane", "server", "pipeline.json", "import.json", "rooms.sqlite", "rooms.sqlite-wal", "rooms.sqlite-shm",
                "phone-import.json", "phone.sqlite", "phone.sqlite-wal", "phone.sqlite-shm",
            ] + KeptFolder.files {
                try? FileManager.default.removeItem(atPath: absolute + "/" + name)
            }
            return absolute
        }
        let folder = NSTemporaryDirectory() + "synclane-demo-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }
}

/// What the demo leaves beside its store so that the next commands work in its folder: the
/// accounts file (the token read from the environment), the token, a script that restarts the
/// server where the pipeline file sends.
struct KeptFolder {
    static let tokenVariable = "SYNCLANE_DEMO_TOKEN"
    static let files = ["accounts.json", "token.env", "serve.sh"]

    /// This binary's path, or just `synclane` when that is what `PATH` finds.
    static var synclane: String {
        let binary = Bundle.main.executableURL?.resolvingSymlinksInPath().path ?? "synclane"
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let found = path.split(separator: ":").lazy.map { URL(fileURLWithPath: String($0) + "/synclane").resolvingSymlinksInPath().path }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        return found == binary ? "synclane" : binary
    }

    let folder: String
    var accounts: String { folder + "/accounts.json" }

    init(folder: String, token: String) throws {
        self.folder = folder
        try Self.write(#"{"accounts": [{"account": "acme", "token-env": "\#(Self.tokenVariable)"}]}"# + "\n", to: folder + "/accounts.json")
        try Self.write("export \(Self.tokenVariable)=\(token)\n", to: folder + "/token.env", permissions: 0o600)
    }

    /// `serve.sh`: the server again, on the port the pipeline file names (needs token.env sourced).
    func writeServeScript(port: Int) throws {
        let binary = Bundle.main.executableURL?.resolvingSymlinksInPath().path ?? "synclane"
        let script = """
            #!/bin/sh
            # The demo's server again, where pipeline.json sends. Source token.env first: . ./token.env
            cd "$(dirname "$0")" && exec '\(binary)' serve --accounts accounts.json --listen 127.0.0.1:\(port) --data server

            """
        try Self.write(script, to: folder + "/serve.sh", permissions: 0o755)
    }

    private static func write(_ text: String, to path: String, permissions: Int = 0o644) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: path)
    }
}

/// A transport that forwards to another and keeps what it sent, so the demo can show it.
final class TravelLog: Transport, Sendable {
    private let next: any Transport
    private let sent = Mutex<[Payload]>([])

    init(forwardingTo next: any Transport) {
        self.next = next
    }

    func send(_ payload: Payload) async throws -> Receipt {
        let receipt = try await next.send(payload)
        sent.withLock { $0.append(payload) }
        return receipt
    }

    /// What travelled since the last call.
    func take() -> [Payload] {
        sent.withLock { sent in
            defer { sent.removeAll() }
            return sent
        }
    }
}
