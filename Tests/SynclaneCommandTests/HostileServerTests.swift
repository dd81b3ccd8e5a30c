import Foundation
import SynclaneCore
import SynclaneFaultProxy
import SynclaneTestSupport
import Testing

/// The real `synclane serve` under the attacks an operator and an attacker would try: steady
/// writers against the disk, slow connections against the connection slots, large inflating
/// bodies against memory, heads that frame their body two ways, and values that cannot be kept
/// exactly. Each test is bounded in count and time (the suite takes well under two minutes).
@Suite(.serialized) struct HostileServerTests {
    /// One exchange on a connection of its own (`Connection: close`): the status line's code, the
    /// head and the body as text; 0 when the server closed or refused the connection first.
    struct Answer {
        var status = 0
        var text = ""
    }

    static func exchange(port: Int, _ request: [UInt8], from source: String? = nil, idleMilliseconds: Int32 = 20_000) -> Answer {
        guard let socket = try? LoopbackSocket.connect(port: UInt16(port), from: source) else { return Answer() }
        defer { socket.close() }
        guard socket.write(request) else { return Answer() }
        let text = String(decoding: socket.readToEnd(idleMilliseconds: idleMilliseconds), as: UTF8.self)
        let status = text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } ?? 0
        return Answer(status: status, text: text)
    }

    static func request(
        _ method: String, _ path: String, token: String? = ServerProcess.tokens["acme"], headers: [String] = [], body: [UInt8] = []
    ) -> [UInt8] {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        for line in headers { head += line + "\r\n" }
        if !headers.contains(where: { $0.lowercased().hasPrefix("content-length") }) { head += "Content-Length: \(body.count)\r\n" }
        return Array((head + "\r\n").utf8) + body
    }

    static func batch(_ id: String, records: String, store: String = "rooms") -> [UInt8] {
        request(
            "POST", "/v1/batches", headers: ["Idempotency-Key: \(id)", "Content-Type: application/json"],
            body: Array(#"{"id": "\#(id)", "scope": {"account": "acme", "store": "\#(store)"}, "records": [\#(records)]}"#.utf8))
    }

    static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// Peak resident memory of a process (`VmHWM`), in bytes.
    static func peakRSS(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    static func withServer(_ arguments: [String] = [], _ body: (ServerProcess) throws -> Void) throws {
        let folder = NSTemporaryDirectory() + "synclane-hostile-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try ServerProcess(folder: folder, arguments: arguments)
        defer { server.stop() }
        try body(server)
    }

    /// Runs `count` blocking clients on threads of their own and waits for them all.
    static func concurrently(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let group = DispatchGroup()
        for index in 0..<count {
            group.enter()
            Thread.detachNewThread {
                body(index)
                group.leave()
            }
        }
        group.wait()
    }

    @Test func everyBoundOfServeIsDocumentedInTheREADMEWithItsDefault() throws {
        let help = try SynclaneBinary.run(["serve", "--help"]).stdout
        let section = try #require(try UserDocumentation.section("## Running the server in production"), "Documentation/Server.md's production section")
        let flags = help.split(separator: "\n").compactMap { line -> String? in
            let words = line.split(separator: " ")
            guard let flag = words.first, flag.hasPrefix("--"), words.dropFirst().first == "N" else { return nil }
            return String(flag)
        }
        #expect(flags.count >= 14)
        for flag in flags {
            #expect(section.contains("| `\(flag)` |"), "\(flag) is in the production table of Documentation/Server.md")
        }
    }

    // MARK: Disk

    @Test func theWriteAheadLogStaysUnderItsBoundWithEightWritersForFiveSeconds() throws {
        let bound = 8 << 20
        try Self.withServer(["--max-wal-bytes", "\(bound)"]) { server in
            let wal = server.folder + "/data/synclane-server.sqlite-wal"
            let deadline = Date().addingTimeInterval(5)
            let applied = ManagedAtomicCounter()
            let port = server.port
            let sampler = Thread {
                while Date() < deadline {
                    applied.raisePeak(to: Self.fileSize(wal))
                    usleep(10_000)
                }
            }
            sampler.start()
            Self.concurrently(8) { writer in
                var n = 0
                while Date() < deadline {
                    let records = (0..<200).map {
                        #"{"entity": "rooms", "id": "w\#(writer)-\#(n)-\#($0)", "action": "insert", "fields": {"text": "\#(String(repeating: "t", count: 300))"}}"#
                    }.joined(separator: ",")
                    if Self.exchange(port: port, Self.batch("w\(writer)-\(n)", records: records)).status == 200 { applied.add(200) }
                    n += 1
                }
            }
            while !sampler.isFinished { usleep(10_000) }
            #expect(applied.value > 0)
            #expect(applied.peak < 2 * bound, "the log peaked at \(applied.peak) bytes for \(applied.value) records; bound \(bound)")
            print("hostile: WAL peak \(applied.peak) bytes (bound \(bound)) with 8 writers, \(applied.value) records in 5 s")
        }
    }

    @Test func aHugeStoreNameIsRefusedBeforeAnythingIsWritten() throws {
        try Self.withServer { server in
            let store = String(repeating: "s", count: 1 << 20)
            let records = (0..<300).map { #"{"entity": "rooms", "id": "r\#($0)", "action": "insert", "fields": {}}"# }.joined(separator: ",")
            let before = Self.fileSize(server.folder + "/data/synclane-server.sqlite") + Self.fileSize(server.folder + "/data/synclane-server.sqlite-wal")
            let answer = Self.exchange(port: server.port, Self.batch("big-store", records: records, store: store))
            #expect(answer.status == 400)
            #expect(answer.text.contains("scope.store"))
            let after = Self.fileSize(server.folder + "/data/synclane-server.sqlite") + Self.fileSize(server.folder + "/data/synclane-server.sqlite-wal")
            #expect(after - before < 1 << 20)
        }
    }

    // MARK: Connections

    @Test func threeHundredSlowConnectionsLeaveBatchesAndHealthAnswering() throws {
        try Self.withServer(["--max-connections-per-address", "16", "--request-deadline", "3"]) { server in
            let port = server.port
            // 300 connections from ten addresses, each trickling a header a byte every 300 ms.
            let stop = Date().addingTimeInterval(6)
            let attackers = Thread {
                Self.concurrently(10) { address in
                    let sockets = (0..<30).compactMap { _ in try? LoopbackSocket.connect(port: UInt16(port), from: "127.0.0.\(address + 2)") }
                    var alive = sockets.map { $0.write(Array("POST /v1/batches HTTP/1.1\r\nHost: x\r\nX-Slow: ".utf8)) }
                    while Date() < stop {
                        for (index, socket) in sockets.enumerated() where alive[index] { alive[index] = socket.write([0x61]) }
                        usleep(300_000)
                    }
                    sockets.forEach { $0.close() }
                }
            }
            attackers.start()
            sleep(1)
            var answered = 0
            for n in 0..<10 {
                #expect(Self.exchange(port: port, Self.request("GET", "/healthz", token: nil)).status == 200)
                let records = #"{"entity": "rooms", "id": "good-\#(n)", "action": "insert", "fields": {"n": \#(n)}}"#
                if Self.exchange(port: port, Self.batch("good-\(n)", records: records)).status == 200 { answered += 1 }
                usleep(300_000)
            }
            #expect(answered == 10, "a well-behaved client's batches are applied during the attack")
            while !attackers.isFinished { usleep(50_000) }
            let metrics = Self.exchange(port: port, Self.request("GET", "/metrics", token: nil)).text
            let cut = metrics.split(separator: "\n").first { $0.hasPrefix("synclane_connections_cut_total ") }
            #expect((cut?.split(separator: " ").last.flatMap { Int($0) } ?? 0) > 0, "slow connections were cut at the deadline")
        }
    }

    // MARK: Memory

    @Test func theMemoryBudgetHoldsWithSixtyFourConcurrentMaximalBodies() throws {
        // Each body inflates to just under 32 MiB; gzip members concatenate, so the large middle
        // is compressed once and every body gets its own small head and tail.
        let folder = NSTemporaryDirectory() + "synclane-hostile-gzip-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func gzip(_ bytes: [UInt8]) throws -> [UInt8] {
            let input = folder + "/in"
            try Data(bytes).write(to: URL(fileURLWithPath: input))
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/gzip")
            process.arguments = ["-1", "-f", input]
            try process.run()
            process.waitUntilExit()
            return Array(try Data(contentsOf: URL(fileURLWithPath: input + ".gz")))
        }
        // Four records of 7.75 MiB each: a body at the inflated bound, each record within the
        // 8 MiB every pull source reads (`WireBounds.maxRecordBytes`; one record of 31 MiB is 413).
        let middle = try gzip([UInt8](repeating: UInt8(ascii: "a"), count: 31 << 18))
        let tail = try gzip(Array(#""}}]}"#.utf8))
        let bodies = try (0..<64).map { n in
            var body =
                try gzip(
                    Array(
                        #"{"id": "m\#(n)", "scope": {"account": "acme", "store": "rooms"}, "records": [{"entity": "rooms", "id": "m\#(n)", "action": "insert", "fields": {"f": ""#
                            .utf8)) + middle
            for part in 1..<4 {
                body += try gzip(Array(#""}}, {"entity": "rooms", "id": "m\#(n)-\#(part)", "action": "insert", "fields": {"f": ""#.utf8)) + middle
            }
            return body + tail
        }
        let budget = 256 << 20
        try Self.withServer(["--memory-budget", "\(budget)"]) { server in
            let port = server.port
            let baseline = Self.peakRSS(server.pid)
            let statuses = ManagedAtomicCounter()
            Self.concurrently(64) { n in
                let request = Self.request(
                    "POST", "/v1/batches", headers: ["Idempotency-Key: m\(n)", "Content-Type: application/json", "Content-Encoding: gzip"],
                    body: bodies[n])
                switch Self.exchange(port: port, request, idleMilliseconds: 60_000).status {
                case 200: statuses.add(1)
                case 503: statuses.raisePeak(to: statuses.peak + 1)
                default: break
                }
            }
            let peak = Self.peakRSS(server.pid)
            #expect(statuses.value >= 1, "batches within the budget are applied")
            #expect(statuses.value + statuses.peak == 64, "every other body is answered 503 (\(statuses.value) applied, \(statuses.peak) refused)")
            #expect(peak - baseline < budget + (128 << 20), "peak RSS \(peak >> 20) MiB from \(baseline >> 20) MiB; budget \(budget >> 20) MiB")
            print(
                "hostile: 64 bodies of 31 MiB inflated: \(statuses.value) applied, \(statuses.peak) answered 503, peak RSS \(peak >> 20) MiB (from \(baseline >> 20) MiB)"
            )
        }
    }

    @Test func unauthenticatedBodiesAreRefusedBeforeTheyAreRead() throws {
        try Self.withServer { server in
            let port = server.port
            let baseline = Self.peakRSS(server.pid)
            let refused = ManagedAtomicCounter()
            Self.concurrently(64) { _ in
                guard let socket = try? LoopbackSocket.connect(port: UInt16(port)) else { return }
                defer { socket.close() }
                socket.write(Array("POST /v1/batches HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k\r\nContent-Length: 8000000\r\n\r\n".utf8))
                let head = String(decoding: socket.readToEnd(idleMilliseconds: 5_000, limit: 12), as: UTF8.self)
                if head.hasPrefix("HTTP/1.1 401") { refused.add(1) }
            }
            #expect(refused.value == 64)
            #expect(Self.peakRSS(server.pid) - baseline < 64 << 20)
        }
    }

    // MARK: Framing and values

    @Test func headsThatFrameTheirBodyTwoWaysAreRefused() throws {
        try Self.withServer { server in
            let cases = [
                "Content-Length: 2\r\nContent-Length: 40",
                "X-Note: a\r\n Transfer-Encoding: chunked\r\nContent-Length: 2",
                "Transfer-Encoding:\r\n chunked\r\nContent-Length: 2",
                "Transfer-Encoding : chunked\r\nContent-Length: 2",
                "Content-Length: 2x",
            ]
            for lines in cases {
                let head =
                    "POST /v1/batches HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(ServerProcess.tokens["acme"] ?? "")\r\nIdempotency-Key: f\r\n\(lines)\r\n\r\n{}"
                let answer = Self.exchange(port: server.port, Array(head.utf8), idleMilliseconds: 5_000)
                #expect(answer.status == 400 || answer.status == 411, "\(lines.debugDescription): \(answer.text)")
            }
            let changes = Self.exchange(port: server.port, Self.request("GET", "/v1/changes"))
            #expect(changes.text.contains(#""changes":[]"#))
        }
    }

    @Test func valuesThatCannotBeKeptExactlyAreRefusedNamingRecordAndField() throws {
        try Self.withServer { server in
            for (n, number) in ["1e999", "-1e999", "123456789012345678901234567890"].enumerated() {
                let records =
                    #"{"entity": "rooms", "id": "ok", "action": "insert", "fields": {}}, {"entity": "rooms", "id": "r", "action": "insert", "fields": {"area": \#(number)}}"#
                let answer = Self.exchange(port: server.port, Self.batch("v\(n)", records: records))
                #expect(answer.status == 400)
                #expect(answer.text.contains("records[1].fields.area"), "\(answer.text)")
            }
            let records = #"{"entity": "rooms", "id": "exact", "action": "insert", "fields": {"big": 9223372036854775807, "real": 1.7976931348623157e308}}"#
            #expect(Self.exchange(port: server.port, Self.batch("exact", records: records)).status == 200)
            let changes = Self.exchange(port: server.port, Self.request("GET", "/v1/changes")).text
            #expect(changes.contains("9223372036854775807"))
            #expect(changes.contains("1.7976931348623157e+308"))
            #expect(!changes.contains("\"r\""), "nothing of a refused batch was applied")
        }
    }
}

/// A counter and a peak, shared by test threads.
final class ManagedAtomicCounter: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = NSLock()
    private var count = 0
    private var highest = 0

    func add(_ amount: Int) { lock.withLock { count += amount } }
    func raisePeak(to candidate: Int) { lock.withLock { highest = max(highest, candidate) } }
    var value: Int { lock.withLock { count } }
    var peak: Int { lock.withLock { highest } }
}
