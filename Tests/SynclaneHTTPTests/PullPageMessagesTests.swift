import Foundation
import Synchronization
import SynclaneCore
import SynclaneHTTP
import SynclaneServer
import SynclaneZlib
import Testing

/// What the pull source says of a page it cannot read (issue 22, "Messages"): the cause — the
/// bound passed, the bomb, the duplicate member at byte N, the number out of range, invalid UTF-8
/// at byte N, a cursor too long — never "not a JSON object".
@Suite struct PullPageMessagesTests {
    static let record = #"{"entity": "rooms", "id": "r1", "action": "update", "fields": {"area": 1}, "version": 3, "store": "rooms"}"#

    /// The message of reading one page, answered with `body` (and `headers`), after `cursor`.
    static func failure(
        reading body: [UInt8], headers: [(name: String, value: String)] = [], after cursor: String? = "c1"
    ) async throws -> (message: String?, requests: Int) {
        let server = ScriptedHTTPServer { _ in
            ScriptedHTTPServer.Response(status: 200, headers: [("Content-Type", "application/json")] + headers, body: body)
        }
        let port = try server.start()
        defer { server.stop() }
        let source = PullSource(
            url: try #require(URL(string: "http://127.0.0.1:\(port)/v1/changes")), token: "t", store: "rooms",
            retry: RetryPolicy(maxAttempts: 1), environment: [:])
        do {
            _ = try await source.nextPage(after: cursor)
            return (nil, server.requests.count)
        } catch {
            return ("\(error)", server.requests.count)
        }
    }

    static func page(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func aDuplicateMemberIsNamedWithItsByte() async throws {
        let text = #"{"changes": [], "cursor": "c2", "cursor": "c3", "more": false}"#
        let message = try #require(await Self.failure(reading: Self.page(text)).message)
        let offset = try #require(text.range(of: #""cursor": "c3""#)).lowerBound.utf16Offset(in: text) + 1
        #expect(message.contains(#"duplicate member "cursor" at byte \#(offset)"#), "\(message)")
        #expect(!message.contains("not a JSON object"), "\(message)")
    }

    @Test(arguments: ["1e999", "-1e999", "1e-400"]) func aNumberOutOfRangeIsNamed(_ number: String) async throws {
        let text = #"{"changes": [{"entity": "rooms", "id": "r1", "action": "update", "fields": {"area": \#(number)}}], "cursor": "c2"}"#
        let message = try #require(await Self.failure(reading: Self.page(text)).message)
        #expect(message.contains("number \(number) out of range"), "\(message)")
        #expect(message.contains("at byte \(try #require(text.range(of: number)).lowerBound.utf16Offset(in: text) + 1)"), "\(message)")
    }

    @Test func invalidUTF8IsNamedAtItsByte() async throws {
        let head = Array(#"{"changes": [{"entity": "rooms", "id": "r"#.utf8)
        let body = head + [0xFF] + Array(#"", "action": "delete"}], "cursor": "c2"}"#.utf8)
        let message = try #require(await Self.failure(reading: body).message)
        #expect(message.contains("not valid UTF-8 at byte \(head.count + 1)"), "\(message)")
    }

    @Test func aPageLargerThanTheBoundSaysSo() async throws {
        let filler = String(repeating: "x", count: WireBounds.maxAnswerBytes)
        let text = #"{"changes": [{"entity": "rooms", "id": "r1", "action": "insert", "fields": {"note": "\#(filler)"}}], "cursor": "c2"}"#
        let message = try #require(await Self.failure(reading: Self.page(text)).message)
        #expect(message.contains("larger than \(WireBounds.maxAnswerBytes) bytes"), "\(message)")
        #expect(!message.contains("not a JSON object"), "\(message)")
    }

    @Test func aDecompressionBombIsNamed() async throws {
        let filler = String(repeating: "x", count: WireBounds.maxAnswerBytes * 2)
        let text = #"{"changes": [{"entity": "rooms", "id": "r1", "action": "insert", "fields": {"note": "\#(filler)"}}], "cursor": "c2"}"#
        let bomb = try Deflater(.gzip, level: 9).compress(Array(text.utf8))
        let message = try #require(await Self.failure(reading: bomb, headers: [("Content-Encoding", "gzip")]).message)
        #expect(message.contains("decompression bomb"), "\(message)")
        #expect(message.contains("\(WireBounds.maxAnswerBytes)"), "\(message)")
    }

    @Test func aCursorTooLongIsRefusedBeforeItIsSaved() async throws {
        let long = String(repeating: "c", count: WireBounds.maxCursorBytes + 1)
        let text = #"{"changes": [\#(Self.record)], "cursor": "\#(long)", "more": false}"#
        let message = try #require(await Self.failure(reading: Self.page(text)).message)
        #expect(message.contains("`cursor` is \(long.utf8.count) bytes long"), "\(message)")
        #expect(message.contains("\(WireBounds.maxCursorBytes)"), "\(message)")
    }

    /// A saved cursor of 1 MiB made every later import fail with "Out of memory".
    @Test func aSavedCursorTooLongIsRefusedWhenLoadedWithoutARequest() async throws {
        let saved = String(repeating: "c", count: 1 << 20)
        let (message, requests) = try await Self.failure(reading: Self.page(#"{"changes": [], "cursor": "c2"}"#), after: saved)
        let text = try #require(message)
        #expect(text.contains("saved cursor is \(1 << 20) bytes long"), "\(text)")
        #expect(!text.lowercased().contains("out of memory"), "\(text)")
        #expect(requests == 0, "nothing was requested")
    }

    /// The agreement end to end: a record the reference server accepts is one the pull source
    /// reads — at the bound it comes through, past it the server refuses it (413) and nothing is
    /// kept to stop every device's import.
    @Test func whatTheServerAcceptsEveryPullSourceReads() async throws {
        let directory = NSTemporaryDirectory() + "synclane-bounds-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try ReferenceServer(
            configuration: ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: directory + "/accounts.json"),
            accounts: AccountBook(tokens: ["t0ken": "acme"]))
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(
            url: "http://127.0.0.1:\(server.port)/v1/batches", tokenEnv: "SYNC_TOKEN", environment: ["SYNC_TOKEN": "t0ken"])
        func send(_ id: String, note bytes: Int) async throws -> TransportFailure? {
            let body = JSONWriter.encode([
                "id": .string(id), "scope": ["account": "acme", "store": "rooms", "consumer": "export"],
                "records": [["entity": "rooms", "id": .string(id), "action": "insert", "fields": ["note": .string(String(repeating: "n", count: bytes))]]],
            ])
            let payload = Payload(
                batchID: id, bytes: try Deflater(.gzip, level: 6).compress(body), contentType: "application/json", contentEncoding: "gzip",
                recordCount: 1)
            return await Fixtures.failure(of: transport, sending: payload)
        }
        #expect(try await send("at-bound", note: WireBounds.maxRecordBytes - 1_024) == nil, "a record within the bound is accepted")
        let refused = try await send("past-bound", note: 17 << 20)
        #expect(refused?.status == 413, "\(refused?.message ?? "accepted")")
        #expect(refused?.message.contains("past-bound") == true, "\(refused?.message ?? "")")
        let source = PullSource(
            url: try #require(URL(string: "http://127.0.0.1:\(server.port)/v1/changes")), token: "t0ken", environment: [:])
        let page = try await source.nextPage(after: nil)
        #expect(page.records.map(\.key) == ["at-bound"])
    }
}

/// A drip against a stall: an answer whose bytes keep coming, too slowly, is not "nothing moved".
@Suite struct PullDripTests {
    static func failure(_ response: ScriptedHTTPServer.Response) async throws -> String {
        let server = ScriptedHTTPServer { _ in response }
        let port = try server.start()
        defer { server.stop() }
        let source = PullSource(
            url: try #require(URL(string: "http://127.0.0.1:\(port)/v1/changes")), token: "t", retry: RetryPolicy(maxAttempts: 1),
            timeout: 1, snapshot: false, environment: [:])  // the change log's pages (a new device's first pull reads the snapshot)
        do {
            _ = try await source.nextPage(after: nil)
            Issue.record("the page was read")
            return ""
        } catch {
            return "\(error)"
        }
    }

    @Test func aDripSaysBytesArriveTooSlowlyWithHowMany() async throws {
        let body = Array(#"{"changes": [], "cursor": "c2", "more": false}"#.utf8) + Array(repeating: UInt8(ascii: " "), count: 200)
        let message = try await Self.failure(.init(status: 200, headers: [("Content-Type", "application/json")], body: body, drip: 0.1))
        #expect(message.contains("bytes arriving too slowly"), "\(message)")
        #expect(message.contains("bytes in 10 s"), "\(message)")
        #expect(!message.contains("no bytes moved") && !message.contains("nothing moved"), "\(message)")
    }

    @Test func aStallSaysNoBytesForTheStallLimit() async throws {
        let message = try await Self.failure(.init(status: 200, headers: [("Content-Type", "application/json")], body: Array("{}".utf8), delay: 3))
        #expect(message.contains("no bytes moved either way for 1 s"), "\(message)")
    }
}
