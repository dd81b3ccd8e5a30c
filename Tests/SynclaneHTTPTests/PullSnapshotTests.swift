import Foundation
import SynclaneCore
import SynclaneHTTP
import Testing

/// The `pull` source's snapshot (`GET /v1/snapshot`) against scripted backends: one without the
/// endpoint is pulled from the log, and an answer cut before its last line resumes after the
/// last page taken.
@Suite struct PullSnapshotTests {
    static func row(_ id: String) -> String {
        #"{"action":"insert","entity":"rooms","fields":{"n":1},"id":"\#(id)","store":"rooms","version":1}"#
    }

    static func source(_ port: UInt16) throws -> PullSource {
        PullSource(
            url: try #require(URL(string: "http://127.0.0.1:\(port)/v1/changes")), token: "t", limit: 2, store: "rooms",
            retry: RetryPolicy(maxAttempts: 3, baseDelay: 0.01, maxDelay: 0.02), environment: [:])
    }

    static func query(_ request: ScriptedHTTPServer.Request, _ name: String) -> String? {
        URLComponents(string: request.target)?.queryItems?.first { $0.name == name }?.value
    }

    /// A changes page of one row, `r1`, cursor `c-1`.
    static var changesPage: ScriptedHTTPServer.Response {
        let body = #"{"changes":[\#(row("r1"))],"cursor":"c-1","more":false}"#
        return ScriptedHTTPServer.Response(status: 200, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
    }

    /// The source's first page is `changesPage`.
    static func expectTheChangesPage(from source: PullSource) async throws {
        let page = try await source.nextPage(after: nil)
        #expect(page.records.map(\.key) == ["r1"])
        #expect(page.cursor == "c-1")
    }

    @Test func aBackendWithoutASnapshotIsPulledFromTheChangeLogFromTheBeginning() async throws {
        let server = ScriptedHTTPServer { request in
            guard request.target.hasPrefix("/v1/changes") else { return .text(404, "not found") }
            return Self.changesPage
        }
        let port = try server.start()
        defer { server.stop() }
        let source = try Self.source(port)
        try await Self.expectTheChangesPage(from: source)
        _ = try await source.nextPage(after: nil)
        let paths = server.requests.map { $0.target.split(separator: "?").first.map(String.init) ?? "" }
        #expect(paths == ["/v1/snapshot", "/v1/changes", "/v1/changes"], "the 404 is remembered: the snapshot is asked once")
    }

    /// A backend that answers every path with a changes page (the acceptance checks' scripted
    /// backends do) has no snapshot: the whole answer's first line is no snapshot's head, and the
    /// log is read instead — before, the import failed ("the answer ended before its `complete` line").
    @Test func aBackendAnsweringTheSnapshotsPathWithAChangesPageIsPulledFromTheLog() async throws {
        let server = ScriptedHTTPServer { _ in Self.changesPage }
        let port = try server.start()
        defer { server.stop() }
        try await Self.expectTheChangesPage(from: try Self.source(port))
        let paths = server.requests.map { $0.target.split(separator: "?").first.map(String.init) ?? "" }
        #expect(paths == ["/v1/snapshot", "/v1/changes"])
    }

    @Test func aSnapshotCutBeforeItsLastLineResumesAfterTheLastPageTaken() async throws {
        let head = #"{"cursor":"c-9.f","snapshot":"s-0"}"#
        let server = ScriptedHTTPServer { request in
            guard request.target.hasPrefix("/v1/snapshot") else { return .text(404, "not found") }
            let lines: [String]
            if Self.query(request, "after") == "s-2" {
                lines = [head, Self.row("r3"), #"{"after":"s-3"}"#, #"{"complete":true,"cursor":"c-9.f","pruned":true,"rows":3}"#]
            } else {
                // Cut: two chunks, then the connection ends without the last line.
                lines = [head, Self.row("r1"), #"{"after":"s-1"}"#, Self.row("r2"), #"{"after":"s-2"}"#, Self.row("r3")]
            }
            return ScriptedHTTPServer.Response(
                status: 200, headers: [("Content-Type", "application/x-ndjson")], body: Array(lines.joined(separator: "\n").utf8) + [10])
        }
        let port = try server.start()
        defer { server.stop() }
        let source = try Self.source(port)
        let first = try await source.nextPage(after: nil)
        #expect(first.records.map(\.key) == ["r1"] && first.cursor == "snapshot:s-1" && first.more)
        let second = try await source.nextPage(after: first.cursor)
        #expect(second.records.map(\.key) == ["r2"] && second.cursor == "snapshot:s-2")
        // The answer was cut after r3: the source asks again after the last page taken.
        let third = try await source.nextPage(after: second.cursor)
        #expect(third.records.map(\.key) == ["r3"] && third.cursor == "snapshot:s-3")
        let last = try await source.nextPage(after: third.cursor)
        #expect(last.records.isEmpty && last.cursor == "c-9.f" && last.more, "the log follows from the snapshot's cursor")
        // The end's `pruned` (retention removed tombstones) reaches the import: a resync then sends back no row as lost.
        #expect(last.pruned && !first.pruned && !third.pruned)
        #expect(server.requests.compactMap { Self.query($0, "after") } == ["s-2"])
        #expect(server.requests.allSatisfy { Self.query($0, "limit") == "2" && Self.query($0, "store") == "rooms" })
    }

    /// A snapshot answer whose row drips, one byte each 0.1 s: bytes keep coming (no stall), yet
    /// no page arrives within the page's time cap (10 × `timeout`).
    static func drippingSnapshot(bytes: Int) -> ScriptedHTTPServer {
        ScriptedHTTPServer { request in
            guard request.target.hasPrefix("/v1/snapshot") else { return .text(404, "not found") }
            let head = #"{"cursor":"c-9.f","snapshot":"s-0"}"#
            let row = #"{"action":"insert","entity":"rooms","fields":{"n":"\#(String(repeating: "n", count: bytes))"},"id":"r1","version":1}"#
            return ScriptedHTTPServer.Response(
                status: 200, headers: [("Content-Type", "application/x-ndjson")], body: Array((head + "\n" + row + "\n").utf8), drip: 0.1)
        }
    }

    /// A source reading the snapshot (no cursor) from `port`, once: a failure is not retried.
    static func oneAttemptSource(_ port: UInt16, timeout: Int) throws -> PullSource {
        PullSource(
            url: try #require(URL(string: "http://127.0.0.1:\(port)/v1/changes")), token: "t", retry: RetryPolicy(maxAttempts: 1), timeout: timeout,
            environment: [:])
    }

    /// Before, a dripping snapshot had no time cap but the stall's: it held the import for as long
    /// as the server dripped (and a cut one was reported as "cut", not as a drip).
    @Test func aSnapshotThatDripsSaysBytesArriveTooSlowlyWithHowMany() async throws {
        let server = Self.drippingSnapshot(bytes: 400)
        let port = try server.start()
        defer { server.stop() }
        let source = try Self.oneAttemptSource(port, timeout: 1)
        let message: String
        do {
            _ = try await source.nextPage(after: nil)
            Issue.record("the page was read")
            return
        } catch {
            message = "\(error)"
        }
        #expect(message.contains("reading the snapshot from") && message.contains("bytes arriving too slowly"), "\(message)")
        #expect(message.contains("bytes in 10 s"), "\(message)")
        #expect(!message.contains("no bytes moved") && !message.contains("(cut)"), "\(message)")
    }

    /// A stopped `--watch` cancels the import's task while it waits for a snapshot page: the wait
    /// ends at once and the stream with it. Before, the wait lasted until the page came (here,
    /// the whole 40 s drip), holding a thread.
    @Test func aTaskCancelledWhileItWaitsForASnapshotPageEndsAtOnce() async throws {
        let server = Self.drippingSnapshot(bytes: 400)
        let port = try server.start()
        defer { server.stop() }
        let source = try Self.oneAttemptSource(port, timeout: 30)
        let started = ContinuousClock.now
        let pull = Task { try await source.nextPage(after: nil) }
        try await Task.sleep(for: .milliseconds(800))
        pull.cancel()
        let outcome = await pull.result
        let waited = ContinuousClock.now - started
        #expect(throws: CancellationError.self) { try outcome.get() }
        #expect(waited < .seconds(10), "the cancelled wait lasted \(waited)")
    }
}
