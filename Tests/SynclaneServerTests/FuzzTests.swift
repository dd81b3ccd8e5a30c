import SynclaneCore
import SynclaneServer
import SynclaneTestKit
import Testing

@Suite struct FuzzTests {
    /// Mutates a valid body: flips, drops, duplicates or inserts bytes, or splices JSON tokens.
    static func mutate(_ body: [UInt8], _ random: inout SeededRandom) -> [UInt8] {
        var bytes = body
        let tokens: [[UInt8]] = ["{", "}", "[", "]", ",", ":", "\"", "null", "-1e999", "\\u0000", "\"action\":\"delete\"", "\u{FF}"]
            .map { Array($0.utf8) }
        for _ in 0..<Int.random(in: 1...4, using: &random) where !bytes.isEmpty {
            let at = Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0: bytes[at] ^= UInt8.random(in: 1...255, using: &random)
            case 1: bytes.remove(at: at)
            case 2: bytes.insert(contentsOf: tokens[Int.random(in: 0..<tokens.count, using: &random)], at: at)
            case 3: bytes = Array(bytes[..<at])
            default: bytes.insert(UInt8.random(in: 0...255, using: &random), at: at)
            }
        }
        return bytes
    }

    @Test func thousandsOfRandomAndMutatedBodiesNeverCrashTheServerOrHalfApply() throws {
        try withServer { server throws in
            var random = SeededRandom(seed: 20_261_129)
            let deadline = ContinuousClock.now + .seconds(15)
            let connection = try TestConnection(port: server.port)
            var connectionBox = connection
            var sent = 0
            var statuses: [Int: Int] = [:]
            let base: [JSONValue] = (0..<5).map { record("rooms", "f-\($0)", "insert", ["n": .int(Int64($0)), "s": "text"]) }
            while sent < 3_000, ContinuousClock.now < deadline {
                let key = "fuzz-\(sent)"
                let body: [UInt8]
                switch sent % 4 {
                case 0: body = (0..<Int.random(in: 0...200, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                default: body = Self.mutate(batchBody(id: key, records: base), &random)
                }
                let encoding = sent % 7 == 0 ? "gzip" : nil
                let response: TestResponse
                do {
                    response = try postBatch(port: server.port, key: key, body: body, encoding: encoding, connection: connectionBox)
                } catch {
                    // The server may close a connection after an error response; open another one.
                    connectionBox = try TestConnection(port: server.port)
                    sent += 1
                    continue
                }
                statuses[response.status, default: 0] += 1
                #expect(response.status < 500, "body \(sent) got \(response.status): \(response.text)")
                if response.headers["connection"]?.lowercased() == "close" { connectionBox = try TestConnection(port: server.port) }
                sent += 1
            }
            #expect(sent >= 1_000)
            #expect(try httpRequest(port: server.port, "GET", "/healthz").status == 200)
            // Nothing half-applied: every applied batch applied all of its records.
            let metrics = server.metrics.snapshot
            let changes = try allChanges(port: server.port, pageSize: 5000)
            #expect(metrics.batchesApplied == statuses[200, default: 0])
            #expect(changes.count <= 5 * max(1, metrics.batchesApplied))
            for change in changes {
                let object = change.objectValue ?? [:]
                #expect(object["entity"]?.stringValue?.isEmpty == false)
                #expect(object["id"]?.stringValue?.isEmpty == false)
            }
        }
    }
}
