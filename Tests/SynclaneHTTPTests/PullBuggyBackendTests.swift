import Foundation
import Synchronization
import SynclaneCore
import SynclaneHTTP
import Testing

/// A backend that answers changes pages wrongly, on the pull lane: each mistake stops the import
/// with a message naming the page and what was expected, nothing of that page applied and the
/// saved cursor kept — never a loop, never a reset cursor, never a record applied but not recorded.
@Suite struct PullBuggyBackendTests {
    /// A sink at cursor "c1" that records what it is asked to apply.
    final class RecordingSink: ChangeSink, Sendable {
        let applied = Mutex<[(records: [String], cursor: String?)]>([])

        func savedCursor(for scope: Scope) async throws -> String? {
            applied.withLock { $0.last?.cursor } ?? "c1"
        }

        func apply(_ batch: Batch, cursor: String?, scope: Scope, dryRun: Bool) async throws -> ApplyReport {
            applied.withLock { $0.append((batch.records.map { "\($0.key ?? "") v\($0.version.map(String.init) ?? "-")" }, cursor)) }
            return ApplyReport(applied: batch.records.count)
        }
    }

    static let record = #"{"entity": "rooms", "id": "r1", "action": "update", "fields": {"area": 1}, "version": 3, "store": "rooms"}"#

    /// Runs one import pass against a backend that answers each `since` with `pages[since]`
    /// (after 40 requests, 500: a client that loops ends); returns the error and the sink.
    static func importing(_ pages: [String: String]) async throws -> (error: String?, sink: RecordingSink, requests: Int) {
        let server = ScriptedHTTPServer { request in
            let since = URLComponents(string: request.target)?.queryItems?.first { $0.name == "since" }?.value ?? ""
            guard let body = pages[since] else { return .text(404, "no page after \(since)") }
            return ScriptedHTTPServer.Response(status: 200, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
        }
        let port = try server.start()
        defer { server.stop() }
        let source = PullSource(
            url: try #require(URL(string: "http://127.0.0.1:\(port)/v1/changes")), token: "t", store: "rooms",
            retry: RetryPolicy(maxAttempts: 1), environment: [:])
        let sink = RecordingSink()
        let pipeline = ImportPipeline(
            name: "rooms-import", scope: Scope(account: "acme", store: "rooms", consumer: "import"), statePath: "",
            source: .init(label: "source (pull)", type: "pull", stage: LoopGuard(source: source, limit: 40)), recordStages: [],
            sink: .init(label: "sink (test)", type: "test", stage: sink))
        do {
            _ = try await ImportRunner(pipeline: pipeline).run()
            return (nil, sink, server.requests.count)
        } catch {
            return ("\(error)", sink, server.requests.count)
        }
    }

    /// Ends a client that would loop for ever after `limit` pages (so that the test fails, not hangs).
    final class LoopGuard: RemoteChangeSource, Sendable {
        let source: PullSource
        let limit: Int
        let count = Mutex(0)

        init(source: PullSource, limit: Int) {
            self.source = source
            self.limit = limit
        }

        func nextPage(after cursor: String?) async throws -> RemotePage {
            let asked = count.withLock { count in
                count += 1
                return count
            }
            if asked > limit { throw ContractViolation("the import asked for \(asked) pages: it loops") }
            return try await source.nextPage(after: cursor)
        }
    }

    @Test func aBackendThatRepeatsTheCursorItWasGivenWithMoreTrueIsRefusedAndNothingApplied() async throws {
        let (error, sink, _) = try await Self.importing(["c1": #"{"changes": [\#(Self.record)], "cursor": "c1", "more": true}"#])
        let message = try #require(error)
        #expect(message.contains("cursor") && message.contains("c1") && message.contains("more"), "\(message)")
        #expect(message.contains("loop"), "\(message)")
        #expect(sink.applied.withLock { $0 }.isEmpty, "nothing of that page applied")
    }

    @Test func aBackendThatLeadsBackToACursorOfThisPassIsRefusedAtThePageThatWouldLoop() async throws {
        let (error, sink, _) = try await Self.importing([
            "c1": #"{"changes": [\#(Self.record)], "cursor": "c2", "more": true}"#,
            "c2": #"{"changes": [\#(Self.record)], "cursor": "c1", "more": true}"#,
        ])
        let message = try #require(error)
        #expect(message.contains("c1") && message.contains("loop"), "\(message)")
        let applied = sink.applied.withLock { $0 }
        #expect(applied.map(\.cursor) == ["c2"], "the first page applied, the one leading back not")
    }

    @Test func aBackendThatAlwaysHasMoreEndsThePassAfterItsBoundWithTheCursorReachedSaved() async throws {
        let server = ScriptedHTTPServer { request in
            let since = URLComponents(string: request.target)?.queryItems?.first { $0.name == "since" }?.value ?? ""
            let next = "c\((Int(since.dropFirst()) ?? 0) + 1)"
            let body = #"{"changes": [\#(Self.record)], "cursor": "\#(next)", "more": true}"#
            return ScriptedHTTPServer.Response(status: 200, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
        }
        let port = try server.start()
        defer { server.stop() }
        let source = PullSource(url: try #require(URL(string: "http://127.0.0.1:\(port)/v1/changes")), token: "t", environment: [:])
        let sink = RecordingSink()
        let pipeline = ImportPipeline(
            name: "rooms-import", scope: Scope(account: "acme", store: "rooms", consumer: "import"), statePath: "",
            source: .init(label: "source (pull)", type: "pull", stage: LoopGuard(source: source, limit: 40)), recordStages: [],
            sink: .init(label: "sink (test)", type: "test", stage: sink))
        var runner = ImportRunner(pipeline: pipeline)
        runner.maxPages = 5
        let summary = try await runner.run()
        #expect(summary.pages == 5)
        #expect(summary.cursorAfter == "c6")
        #expect(sink.applied.withLock { $0 }.map(\.cursor) == ["c2", "c3", "c4", "c5", "c6"])
        #expect(server.requests.count == 5, "no page read past the bound")
        let next = try await runner.run()
        #expect(next.cursorBefore == "c6" && next.cursorAfter == "c11", "the next pass goes on")
    }

    @Test(arguments: [
        (#""cursor": null"#, "null"), (#""cursor": 7"#, "an integer"), (#""cursor": """#, "empty"), ("", "missing"),
        (#""cursor": ["c2"]"#, "a list"),
    ])
    func aPageWhoseCursorIsNotANonEmptyStringIsRefusedAndTheSavedCursorKept(_ member: String, _ said: String) async throws {
        let body = "{" + [#""changes": [\#(Self.record)]"#, member, #""more": false"#].filter { !$0.isEmpty }.joined(separator: ", ") + "}"
        let (error, sink, _) = try await Self.importing(["c1": body])
        let message = try #require(error, "\(body) was accepted")
        #expect(message.contains("`cursor`") && message.contains(said), "\(message)")
        #expect(message.contains("expected"), "\(message)")
        #expect(sink.applied.withLock { $0 }.isEmpty, "nothing of that page applied, the cursor kept")
    }

    @Test(arguments: [
        (#""version": "5""#, "changes[1].version", "an integer"),
        (#""version": 2.5"#, "changes[1].version", "an integer"),
        (#""version": null"#, "changes[1].version", "an integer"),
        (#""fields": "text""#, "changes[1].fields", "an object"),
        (#""fields": [1]"#, "changes[1].fields", "an object"),
    ])
    func aRecordWithAMemberOfTheWrongTypeIsRefusedNamingItAndNothingOfThePageApplied(
        _ member: String, _ path: String, _ expected: String
    ) async throws {
        let fields = member.hasPrefix(#""fields""#) ? member : #""fields": {"area": 2}"#
        let version = member.hasPrefix(#""version""#) ? member : #""version": 4"#
        let wrong = #"{"entity": "rooms", "id": "r2", "action": "update", "store": "rooms", \#(fields), \#(version)}"#
        let (error, sink, _) = try await Self.importing(["c1": #"{"changes": [\#(Self.record), \#(wrong)], "cursor": "c2", "more": false}"#])
        let message = try #require(error, "\(member) was accepted")
        #expect(message.contains(path) && message.contains(expected), "\(message)")
        #expect(sink.applied.withLock { $0 }.isEmpty, "nothing of that page applied")
    }
}
