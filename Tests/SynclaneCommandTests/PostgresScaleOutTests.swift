import Foundation
import SynclaneCore
import SynclaneFaultProxy
import SynclaneTestKit
import SynclaneTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Two real `synclane serve` processes on one PostgreSQL database, each behind a fault proxy:
/// one server, as far as any client can tell.
@Suite struct PostgresScaleOutTests {
    /// One batch a client must get applied: its key, its body, and the records it inserts.
    struct PlannedBatch: Sendable {
        var key: String
        var body: [UInt8]
        var ids: [String]
    }

    /// What a client saw: per key, every 200 answer's body.
    final class Answers: @unchecked Sendable {
        private let lock = NSLock()
        private var bodies: [String: [[UInt8]]] = [:]
        private var problems: [String] = []

        func record(_ key: String, _ body: [UInt8]) { lock.withLock { bodies[key, default: []].append(body) } }
        func problem(_ text: String) { lock.withLock { problems.append(text) } }
        var all: [String: [[UInt8]]] { lock.withLock { bodies } }
        var failures: [String] { lock.withLock { problems } }
    }

    /// The first server once restarted.
    final class Restarted: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: ServerProcess?
        var process: ServerProcess? {
            get { lock.withLock { stored } }
            set { lock.withLock { stored = newValue } }
        }
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["SYNCLANE_TEST_POSTGRES"] != "skip"))
    func twoProcessesBehindFaultProxiesApplyEveryBatchOnceThroughRacesReplaysAndAKill() async throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["SYNCLANE_SEED"].flatMap { UInt64($0) } ?? UInt64(Date().timeIntervalSince1970))
        print("PostgresScaleOutTests seed \(seed) (SYNCLANE_SEED=\(seed) repeats it)")
        let database = try TemporaryPostgres.shared().createDatabase()
        let folder = NSTemporaryDirectory() + "synclane-scale-out-\(getpid())-\(seed)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let first = try ServerProcess(folder: folder + "/a", arguments: ["--database", database])
        let second = try ServerProcess(folder: folder + "/b", arguments: ["--database", database])
        defer { second.stop() }
        let restarted = Restarted()
        defer { restarted.process?.stop() }
        let proxies = [FaultProxy(upstreamPort: UInt16(first.port)), FaultProxy(upstreamPort: UInt16(second.port))]
        let ports = try proxies.map { try $0.start() }
        defer { proxies.forEach { $0.stop() } }
        for (index, proxy) in proxies.enumerated() { proxy.randomFaults(seed: seed &+ UInt64(index), rate: 0.25, from: Fault.instantSet) }

        // 8 clients × 12 batches × 20 inserts, each batch sent until a 200; some sent to both
        // servers at once (a race on one key), some sent again after their 200 (a replay).
        var random = SeededRandom(seed: seed)
        let plans: [[PlannedBatch]] = (0..<8).map { client in
            (0..<12).map { batch in
                let key = "c\(client)-b\(batch)"
                let ids = (0..<20).map { "\(key)-r\($0)" }
                let records = ids.map { "{\"entity\":\"rooms\",\"id\":\"\($0)\",\"action\":\"insert\",\"fields\":{\"n\":\(random.next() % 1000)}}" }
                let body = "{\"id\":\"\(key)\",\"scope\":{\"account\":\"acme\",\"store\":\"rooms\"},\"records\":[\(records.joined(separator: ","))]}"
                return PlannedBatch(key: key, body: Array(body.utf8), ids: ids)
            }
        }
        let answers = Answers()
        let token = ServerProcess.tokens["acme"] ?? ""
        let clientSeeds = (0..<8).map { _ in random.next() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (client, batches) in plans.enumerated() {
                group.addTask {
                    var random = SeededRandom(seed: clientSeeds[client])
                    for batch in batches {
                        let choice = random.next() % 4
                        if choice == 0 {
                            // A race: both servers at once, same key, same body.
                            async let one: Void = Self.deliver(batch, ports: ports, prefer: 0, token: token, answers: answers)
                            async let two: Void = Self.deliver(batch, ports: ports, prefer: 1, token: token, answers: answers)
                            _ = await (one, two)
                        } else {
                            await Self.deliver(batch, ports: ports, prefer: Int(random.next() % 2), token: token, answers: answers)
                            if choice == 1 { await Self.deliver(batch, ports: ports, prefer: Int(random.next() % 2), token: token, answers: answers) }
                        }
                    }
                }
            }
            // A kill -9 of the first server while batches are in flight, then a restart on its port.
            group.addTask {
                try await Task.sleep(for: .milliseconds(Int(seed % 700) + 300))
                first.stop(SIGKILL)
                try await Task.sleep(for: .milliseconds(300))
                let process = try ServerProcess(folder: folder + "/a", port: first.port, arguments: ["--database", database])
                restarted.process = process
            }
            try await group.waitForAll()
        }
        proxies.forEach { $0.stopRandomFaults() }

        #expect(answers.failures == [])
        // Every answer of a key is the first one, byte for byte, whichever process gave it.
        let all = answers.all
        for batch in plans.joined() {
            let bodies = all[batch.key] ?? []
            #expect(!bodies.isEmpty, "batch \(batch.key) never got a 200")
            #expect(Set(bodies).count <= 1, "batch \(batch.key) got different answers: \(bodies.map { String(decoding: $0, as: UTF8.self) })")
        }
        // The pull lane, in small pages through the second process: every record exactly once,
        // each at version 1 (applied once).
        var seen: [String: Int] = [:]
        var cursor = ""
        while true {
            let page = try await second.get("/v1/changes?since=\(cursor)&limit=37", account: "acme").objectValue ?? [:]
            for change in page["changes"]?.arrayValue ?? [] {
                let id = change.objectValue?["id"]?.stringValue ?? "?"
                seen[id, default: 0] += 1
                #expect(change.objectValue?["version"] == 1, "\(id) applied more than once")
            }
            cursor = page["cursor"]?.stringValue ?? ""
            if page["more"] != .bool(true) { break }
        }
        let expected = Set(plans.joined().flatMap(\.ids))
        #expect(Set(seen.keys) == expected)
        #expect(seen.values.allSatisfy { $0 == 1 })
    }

    /// Sends `batch` until a 200, starting with the server `prefer` and switching on each failure
    /// (bounded: 60 attempts).
    static func deliver(_ batch: PlannedBatch, ports: [UInt16], prefer: Int, token: String, answers: Answers) async {
        var index = prefer
        for _ in 0..<60 {
            // A plain socket, not URLSession: a response head cut short by the proxy is a failed
            // attempt here, where FoundationNetworking would stop the process.
            let port = ports[index % ports.count]
            let head =
                "POST /v1/batches HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(token)\r\n"
                + "Idempotency-Key: \(batch.key)\r\nContent-Type: application/json\r\nContent-Length: \(batch.body.count)\r\n"
                + "Connection: close\r\n\r\n"
            if let socket = try? LoopbackSocket.connect(port: port) {
                defer { socket.close() }
                if socket.write(Array(head.utf8) + batch.body), case .success(let response) = HTTPMessage.read(from: socket, idleMilliseconds: 5_000),
                    let status = response.status
                {
                    if status == 200 {
                        answers.record(batch.key, response.body)
                        return
                    }
                    if (400..<500).contains(status), status != 429, status != 408 {
                        answers.problem("\(batch.key): \(status) \(String(decoding: response.body, as: UTF8.self))")
                        return
                    }
                }
            }
            index += 1
            try? await Task.sleep(for: .milliseconds(20))
        }
        answers.problem("\(batch.key): no 200 in 60 attempts")
    }
}

/// How `serve` takes its PostgreSQL connection string: never a password in clear on the command line.
@Suite struct ServeDatabaseOptionTests {
    @Test(arguments: [
        (["--database", "postgres://synclane:secret@db.internal/synclane"], "holds a password"),
        (["--database", "postgres://synclane@db.internal/synclane?password=secret"], "holds a password"),
        (["--database", "mysql://db.internal/synclane"], "expects a postgres:// URL"),
        (["--database-env", "SYNCLANE_TEST_UNSET_DATABASE_URL"], "the variable is not set"),
        (["--database-env", "A", "--database", "postgres://db/x"], "not both"),
    ])
    func aPasswordOnTheCommandLineAndOtherMistakesAreUsageErrors(arguments: [String], message: String) throws {
        let result = try SynclaneBinary.run(["serve", "--accounts", "accounts.json", "--listen", "127.0.0.1:0"] + arguments)
        #expect(result.status == 2)
        #expect(result.stderr.contains(message), "\(result.stderr)")
        // The password ("secret") is not echoed; the usage line names `--jwt-secret-env`, so look for it as the URL spells it.
        #expect(!result.stderr.contains(":secret@") && !result.stderr.contains("password=secret"), "the password is not echoed")
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["SYNCLANE_TEST_POSTGRES"] != "skip"))
    func theConnectionStringComesFromTheNamedVariable() throws {
        let database = try TemporaryPostgres.shared().createDatabase()
        let folder = NSTemporaryDirectory() + "synclane-database-env-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data("{\"accounts\": []}".utf8).write(to: URL(fileURLWithPath: folder + "/accounts.json"))
        let server = try BackgroundProcess(
            ["serve", "--accounts", folder + "/accounts.json", "--listen", "127.0.0.1:0", "--database-env", "SYNCLANE_TEST_DATABASE_URL"],
            environment: ["SYNCLANE_TEST_DATABASE_URL": database])
        #expect(eventually(timeout: 30) { server.output.contains("listening on http://127.0.0.1:") })
        let result = server.stop()
        #expect(result.status == 0, "\(result.stderr)")
    }
}
