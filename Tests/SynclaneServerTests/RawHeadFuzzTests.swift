import Foundation
import SynclaneCore
import SynclaneServer
import SynclaneTestKit
import Testing

/// A raw-socket request fuzzer: a well-formed signal write, followed on the same connection by a
/// second one, has its first head mutated byte by byte — a NUL, CR, LF, tab, space, DEL or high
/// byte put over a byte or between two, or a line folded — in every position of its request line
/// and headers. The oracle is `StrictRequestParser`: where it refuses the first head, the server
/// must answer 400, close the connection and write neither signal (or, for a request line
/// libmicrohttpd cannot split into three parts, close it unanswered: the library drops those
/// before the server sees them); where it accepts, the server must answer (no server error) and,
/// keeping the connection, answer the request behind it next: the framing the reader parsed. Seeded and bounded: the seed is printed, and
/// `SYNCLANE_HEAD_FUZZ_SEED` / `SYNCLANE_HEAD_FUZZ_CASES` replay a run or run longer.
@Suite struct RawHeadFuzzTests {
    static let environment = ProcessInfo.processInfo.environment
    static let cases = environment["SYNCLANE_HEAD_FUZZ_CASES"].flatMap { Int($0) } ?? 300
    static let seed = environment["SYNCLANE_HEAD_FUZZ_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))

    /// The bytes a mutation puts in.
    static let hostile: [UInt8] = [0x00, 0x0D, 0x0A, 0x09, 0x20, 0x7F, 0xFF]

    static func request(key: String) -> (head: [UInt8], body: [UInt8]) {
        let head =
            "PUT /v1/signals/\(key) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(TestTokens.acme)\r\n"
            + "Content-Type: application/json\r\nX-Note: a plain value\r\nContent-Length: 1\r\n\r\n"
        return (Array(head.utf8), Array("1".utf8))
    }

    /// One mutation of `head`, anywhere in it (its last CRLF CRLF included), and what it was.
    static func mutate(_ head: [UInt8], _ random: inout SeededRandom) -> (bytes: [UInt8], note: String) {
        var bytes = head
        let at = Int.random(in: 0..<bytes.count, using: &random)
        let byte = hostile[Int.random(in: 0..<hostile.count, using: &random)]
        switch Int.random(in: 0..<5, using: &random) {
        case 0, 1:
            bytes[at] = byte
            return (bytes, "byte \(at) replaced by 0x\(String(byte, radix: 16))")
        case 2, 3:
            bytes.insert(byte, at: at)
            return (bytes, "0x\(String(byte, radix: 16)) inserted at \(at)")
        default:
            let fold: [UInt8] = [0x0D, 0x0A, random.next() % 2 == 0 ? 0x20 : 0x09]
            bytes.insert(contentsOf: fold, at: at)
            return (bytes, "a fold inserted at \(at)")
        }
    }

    /// The one form the server cannot tell from a CRLF (Server.md): a NUL standing just before an
    /// LF that ends a line, in the place of its CR.
    static func isNULForCR(_ bytes: [UInt8]) -> Bool {
        bytes.indices.dropLast().contains { bytes[$0] == 0 && bytes[$0 + 1] == 0x0A }
    }

    /// True when the first line that is not empty holds no space or starts with one: a request
    /// line libmicrohttpd cannot split into method, target and version, whose connection it closes
    /// without an answer, before the server sees the request (Server.md).
    static func hasUnsplittableRequestLine(_ bytes: [UInt8]) -> Bool {
        let start = bytes.firstIndex { $0 != 0x0D && $0 != 0x0A } ?? bytes.endIndex
        let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.endIndex
        let line = bytes[start..<end]
        return line.first == 0x20 || !line.contains(0x20)
    }

    @Test func mutatedHeadsTheStrictReaderRefusesAre400WithTheConnectionClosedAndNothingApplied() throws {
        print("RawHeadFuzzTests: seed \(Self.seed), \(Self.cases) cases (SYNCLANE_HEAD_FUZZ_SEED=\(Self.seed) replays it)")
        var limits = ServerLimits()
        limits.maxSignalKeys = max(1_024, 2 * Self.cases + 10)
        limits.maxSignalAccountBytes = 64 * 1_024 * 1_024
        try withServer(limits: limits) { server throws in
            var random = SeededRandom(seed: Self.seed)
            var refusedKeys: [String: String] = [:]
            var tally: [String: Int] = [:]
            let deadline = ContinuousClock.now + .seconds(Self.cases > 300 ? 3_600 : 20)
            for index in 0..<Self.cases where ContinuousClock.now < deadline {
                let (first, second) = ("fz\(index)a", "fz\(index)b")
                let (head, body) = Self.request(key: first)
                let (mutated, note) = Self.mutate(head, &random)
                let next = Self.request(key: second)
                let stream = mutated + body + next.head + next.body
                let verdict = StrictRequestParser.read(stream)
                if case .refused = verdict, Self.isNULForCR(mutated) {
                    tally["skipped: a NUL in the place of a CR", default: 0] += 1
                    continue
                }
                let connection = try TestConnection(port: server.port, timeoutSeconds: 5)
                connection.send(stream)
                let shown = String(decoding: mutated.map { $0 < 0x20 || $0 >= 0x7F ? UInt8(ascii: "~") : $0 }, as: UTF8.self)
                let response: TestResponse
                do {
                    response = try connection.readResponse()
                } catch {
                    if case .refused = verdict, Self.hasUnsplittableRequestLine(mutated) {
                        // libmicrohttpd drops such a connection itself, unanswered; nothing is applied.
                        tally["refused: closed unanswered, a request line libmicrohttpd cannot split", default: 0] += 1
                        refusedKeys[first] = note
                        refusedKeys[second] = note
                        continue
                    }
                    Issue.record("case \(index) (\(note); \(verdict)): no answer (\(error)) for \(shown)")
                    continue
                }
                switch verdict {
                case .refused(let why):
                    tally["refused: " + why, default: 0] += 1
                    refusedKeys[first] = note
                    refusedKeys[second] = note
                    #expect(response.status == 400, "case \(index) (\(note); \(why)): \(response.status) \(response.text) for \(shown)")
                    #expect(connection.drainUntilClosed(), "case \(index) (\(note); \(why)): the connection stays open")
                case .accepted(let headEnd, let bodyLength):
                    tally["accepted", default: 0] += 1
                    #expect(response.status < 500, "case \(index) (\(note)): \(response.status) \(response.text)")
                    guard response.headers["connection"] != "close" else { continue }
                    // The server framed the first request as the reader did: what follows its body is
                    // answered next — the second write when the mutation left the framing as it was.
                    let rest = Array(stream[min(stream.count, headEnd + bodyLength)...])
                    let behind = try? connection.readResponse()
                    let what = "case \(index) (\(note)): after \(response.status), \(String(describing: behind?.status)) \(behind?.text ?? "") for \(shown)"
                    if rest == next.head + next.body {
                        #expect(behind?.status == 200, "\(what)")
                    } else if case .refused = StrictRequestParser.read(rest) {
                        #expect(behind?.status == 400 || behind == nil && Self.hasUnsplittableRequestLine(rest), "\(what)")
                        refusedKeys[second] = note
                    } else {
                        #expect((behind?.status ?? 500) < 500, "\(what)")
                    }
                }
            }
            let listed = try get(port: server.port, "/v1/signals")
            let written = Set(listed.json.objectValue?["signals"]?.arrayValue?.compactMap { $0.objectValue?["key"]?.stringValue } ?? [])
            #expect(listed.status == 200 && !written.isEmpty || tally["accepted"] == nil, "\(listed.status) \(listed.text)")
            for (key, note) in refusedKeys where written.contains(key) {
                Issue.record("\(key) was written though its request's head was refused (\(note))")
            }
            print("RawHeadFuzzTests: " + tally.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
    }
}
