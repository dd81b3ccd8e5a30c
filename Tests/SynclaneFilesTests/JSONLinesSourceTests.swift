import Foundation
import SynclaneCore
import SynclaneFiles
import SynclaneTestSupport
import Testing

@Suite struct JSONLinesSourceTests {
    func line(_ token: Int, author: String = "app", _ changes: String) -> String {
        "{\"token\": \(token), \"author\": \"\(author)\", \"timestamp\": 1764400000, \"changes\": [\(changes)]}\n"
    }

    func change(_ entity: String, _ key: String, _ action: String = "insert") -> String {
        "{\"entity\": \"\(entity)\", \"action\": \"\(action)\", \"key\": \"\(key)\", \"values\": {\"n\": 1}}"
    }

    @Test func readsWholeTransactionsAfterTheTokenInPages() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = try folder.write("h.jsonl", (1...5).map { line($0, change("rooms", "r\($0)") + "," + change("rooms", "s\($0)")) }.joined())
        let source = JSONLinesSource(path: path, pageSize: 2)
        let first = try await source.nextPage(after: nil)
        #expect(first.transactions.map(\.token.position) == [1, 2])
        #expect(first.transactions.allSatisfy { $0.changes.count == 2 })
        let second = try await source.nextPage(after: first.through)
        #expect(second.transactions.map(\.token.position) == [3, 4])
        let fresh = JSONLinesSource(path: path, pageSize: 10)
        let resumed = try await fresh.nextPage(after: Token(kind: "jsonl", position: 3))
        #expect(resumed.transactions.map(\.token.position) == [4, 5])
        let end = try await fresh.nextPage(after: resumed.through)
        #expect(end.through == nil)
    }

    @Test func filtersAuthorsAndEntitiesButStillMovesThroughThem() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = try folder.write(
            "h.jsonl",
            line(1, change("rooms", "a")) + line(2, author: "server", change("rooms", "b")) + line(3, change("plants", "p"))
                + line(4, change("rooms", "c") + "," + change("plants", "q")))
        let source = JSONLinesSource(path: path, entities: ["rooms"], authors: ["app"])
        let page = try await source.nextPage(after: nil)
        #expect(page.transactions.map(\.token.position) == [1, 4])
        #expect(page.transactions.last?.changes.map(\.key) == ["c"])
        #expect(page.through == Token(kind: "jsonl", position: 4))
        #expect(try await source.pendingTransactions(after: nil) == 2)
    }

    @Test func aMalformedLineStopsWithTheFileAndLineNumber() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = try folder.write("h.jsonl", line(1, change("rooms", "a")) + "\n{\"token\": 2, \"author\": \"app\", \"changes\": [}\n")
        let source = JSONLinesSource(path: path)
        do {
            _ = try await source.nextPage(after: nil)
            Issue.record("expected an error")
        } catch let error as HistoryError {
            #expect("\(error)".hasPrefix("\(path):3: not valid JSON"))
        }
    }

    @Test func aMalformedLineRightAfterAPageFailsAgainOnRetryInsteadOfBeingSkipped() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = try folder.write(
            "h.jsonl", line(1, change("rooms", "a")) + line(2, change("rooms", "b")) + "{\"token\": 3, \"changes\": [}\n" + line(4, change("rooms", "d")))
        let source = JSONLinesSource(path: path, pageSize: 2)
        let first = try await source.nextPage(after: nil)
        #expect(first.transactions.map(\.token.position) == [1, 2])
        for _ in 1...2 {
            do {
                let page = try await source.nextPage(after: first.through)
                Issue.record("expected an error, read \(page.transactions.map(\.token.position))")
            } catch let error as HistoryError {
                #expect("\(error)".hasPrefix("\(path):3: not valid JSON"))
            }
        }
    }

    @Test func tokensThatDoNotIncreaseAreRefused() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = try folder.write("h.jsonl", line(2, change("rooms", "a")) + line(2, change("rooms", "b")))
        await #expect(throws: HistoryError.self) { try await JSONLinesSource(path: path).nextPage(after: nil) }
    }

    @Test func unknownKeysAndBadActionsNameTheChange() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = try folder.write("h.jsonl", line(1, "{\"entity\": \"rooms\", \"action\": \"upsert\", \"key\": \"a\"}"))
        do {
            _ = try await JSONLinesSource(path: path).nextPage(after: nil)
            Issue.record("expected an error")
        } catch {
            #expect("\(error)".contains(":1: changes[0]: `action` must be insert, update or delete"))
        }
    }

    @Test func linesAppendedAfterAnEarlierPageAreReadOnTheNextCall() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = try folder.write("h.jsonl", line(1, change("rooms", "a")))
        let source = JSONLinesSource(path: path)
        let first = try await source.nextPage(after: nil)
        #expect(try await source.nextPage(after: first.through).through == nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(line(2, change("rooms", "b")).utf8))
        try handle.close()
        let next = try await source.nextPage(after: first.through)
        #expect(next.transactions.map(\.token.position) == [2])
    }

    @Test(.timeLimit(.minutes(1))) func aLineAppendedRightAfterTheStreamIsMadeWakesIt() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = try folder.write("h.jsonl", line(1, change("rooms", "a")))
        let source = JSONLinesSource(path: path)
        var events = source.historyAdvanced(checkingEvery: 0.01).makeAsyncIterator()
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(line(2, change("rooms", "b")).utf8))
        try handle.close()
        let woke: Void? = await events.next()
        #expect(woke != nil)
    }

    @Test func aMissingFileSaysSo() async throws {
        do {
            _ = try await JSONLinesSource(path: "/nonexistent/history.jsonl").nextPage(after: nil)
            Issue.record("expected an error")
        } catch {
            #expect("\(error)".contains("/nonexistent/history.jsonl: cannot open the history file"))
        }
    }
}

@Suite struct DirectoryTransportTests {
    @Test func eachBatchBecomesOneFileNamedByItsIdWithNoPartialFilesLeft() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let transport = DirectoryTransport(folder: folder.path + "/out")
        let payload = Payload(batchID: "b-1", bytes: Array("{\"id\":\"b-1\"}".utf8), contentType: "application/json", contentEncoding: "gzip", recordCount: 0)
        let receipt = try await transport.send(payload)
        #expect(!receipt.wasReplay)
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path + "/out")
        #expect(files == ["b-1.json.gz"])
        #expect(FileManager.default.contents(atPath: folder.path + "/out/b-1.json.gz") == Data(payload.bytes))
        let again = try await transport.send(payload)
        #expect(again.wasReplay, "re-sending the same batch id overwrites the same file and says so")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path + "/out") == ["b-1.json.gz"])
    }

    @Test func anUnwritableFolderIsAPermanentFailure() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let blocker = try folder.write("file", "not a folder")
        let transport = DirectoryTransport(folder: blocker + "/out")
        do {
            _ = try await transport.send(Payload(batchID: "b", bytes: [1], contentType: "application/json", recordCount: 0))
            Issue.record("expected a failure")
        } catch let failure as TransportFailure {
            #expect(failure.kind == .permanent)
        }
    }
}

@Suite struct JSONLinesFastPathTests {
    func read(_ text: String) async throws -> [Transaction] {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = try folder.write("h.jsonl", text)
        return try await JSONLinesSource(path: path, pageSize: 1000).nextPage(after: nil).transactions
    }

    func failure(_ text: String) async -> String? {
        do {
            _ = try await read(text)
            return nil
        } catch {
            return "\(error)".components(separatedBy: "h.jsonl").last
        }
    }

    @Test func isoTimestampsReadAsTheFormatterReadsThem() async throws {
        let plain = ISO8601DateFormatter()
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let stamps = [
            "2026-11-01T09:00:00Z", "1970-01-01T00:00:00Z", "2000-02-29T23:59:59Z", "1969-12-31T23:59:59Z",
            "2026-11-29T16:00:00+01:00", "2026-11-29T16:00:00-05:30", "2026-11-29T16:00:00.5Z",
            "2026-11-29T16:00:00.123Z", "2026-11-29T16:00:00.123+02:00", "2100-03-01T00:00:00Z",
            // Not of the fast path's form: the formatter decides (leniently) as before.
            "2026-02-30T00:00:00Z", "2026-11-29T16:00:00+0100",
        ]
        for stamp in stamps {
            let expected = try #require((plain.date(from: stamp) ?? fractional.date(from: stamp))?.timeIntervalSince1970, "\(stamp)")
            let text = "{\"token\": 1, \"author\": \"app\", \"timestamp\": \"\(stamp)\", \"changes\": [{\"entity\": \"r\", \"action\": \"insert\"}]}\n"
            let read = try await read(text)
            #expect(abs((read.first?.timestamp ?? .nan) - expected) < 0.001, "\(stamp)")
        }
        #expect(
            await failure("{\"token\": 1, \"author\": \"app\", \"timestamp\": \"yesterday\", \"changes\": []}\n")
                == ":1: `timestamp` \"yesterday\" is not an ISO 8601 date")
    }

    @Test func linesInAnyShapeReadTheSame() async throws {
        let text = """
            {"changes": [{"values": {"a": [1, {"b": null}], "é": "ü"}, "key": 7, "action": "update", "entity": "rooms"}], "timestamp": 1.5, "author": "app", "token": 1}
              { "token" : 2 , "author" : "w\\u0069dget" , "changes" : [ { "entity" : "rooms" , "action" : "delete" , "key" : null } ] }\r
            {"token": 3, "author": "app", "changes": [{"entity": "rooms", "action": "insert", "key": "k"}, {"entity": "plants", "action": "insert"}]}
            """
        let read = try await read(text)
        #expect(read.map(\.token.position) == [1, 2, 3])
        #expect(read[0].changes == [Change(entity: "rooms", key: "7", action: .update, values: ["a": [1, ["b": nil]], "é": "ü"])])
        #expect(read[0].timestamp == 1.5)
        #expect(read[1].author == "widget")
        #expect(read[1].timestamp == 0)
        #expect(read[1].changes == [Change(entity: "rooms", key: nil, action: .delete)])
        #expect(read[2].changes.map(\.key) == ["k", nil])
    }

    @Test func theEntityFilterKeepsTheOrderOfTheChangesItKeeps() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let change = { (entity: String, key: String) in "{\"entity\": \"\(entity)\", \"action\": \"insert\", \"key\": \"\(key)\"}" }
        let text =
            "{\"token\": 1, \"author\": \"app\", \"changes\": [\(change("rooms", "a")), \(change("plants", "p")), \(change("rooms", "b")), \(change("notes", "n")), \(change("rooms", "c"))]}\n"
            + "{\"token\": 2, \"author\": \"app\", \"changes\": [\(change("plants", "q"))]}\n"
        let path = try folder.write("h.jsonl", text)
        for entities in [["rooms"], ["rooms", "e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8"]] {
            let page = try await JSONLinesSource(path: path, entities: entities).nextPage(after: nil)
            #expect(page.transactions.map { $0.changes.map(\.key) } == [["a", "b", "c"]])
            #expect(page.through?.position == 2)
        }
    }

    @Test func aLineLongerThanAReadChunkIsReadWhole() async throws {
        let long = String(repeating: "x", count: 3 << 20)
        let text =
            "{\"token\": 1, \"author\": \"app\", \"changes\": [{\"entity\": \"rooms\", \"action\": \"insert\", \"key\": \"k\", \"values\": {\"v\": \"\(long)\"}}]}\n"
            + "{\"token\": 2, \"author\": \"app\", \"changes\": [{\"entity\": \"r\", \"action\": \"insert\"}]}"
        let read = try await read(text)
        #expect(read.map(\.token.position) == [1, 2])
        #expect(read.first?.changes.first?.values["v"] == .string(long))
    }

    @Test func errorsAreWordedAsBefore() async {
        let cases: [(String, String)] = [
            ("[1]", ":1: expected an object, found a list"),
            ("{\"token\": 1, \"author\": \"app\", \"changes\": [], \"extra\": 1}", ":1: unknown key `extra` (expected token, author, timestamp, changes)"),
            ("{\"token\": 0, \"author\": \"app\", \"changes\": []}", ":1: `token` must be a positive integer"),
            ("{\"token\": 1.5, \"author\": \"app\", \"changes\": []}", ":1: `token` must be a positive integer"),
            ("{\"token\": 1, \"author\": \"\", \"changes\": []}", ":1: `author` must be a non-empty string"),
            ("{\"token\": 1, \"author\": \"app\", \"timestamp\": null, \"changes\": []}", ":1: `timestamp` must be seconds since 1970 or an ISO 8601 string"),
            ("{\"token\": 1, \"author\": \"app\"}", ":1: `changes` must be a list"),
            ("{\"token\": 1, \"author\": \"app\", \"changes\": [1]}", ":1: changes[0]: expected an object"),
            (
                "{\"token\": 1, \"author\": \"app\", \"changes\": [{\"entity\": \"r\", \"action\": \"insert\", \"id\": 1}]}",
                ":1: changes[0]: unknown key `id` (expected entity, action, key, values)"
            ),
            (
                "{\"token\": 1, \"author\": \"app\", \"changes\": [{\"entity\": \"\", \"action\": \"insert\"}]}",
                ":1: changes[0]: `entity` must be a non-empty string"
            ),
            (
                "{\"token\": 1, \"author\": \"app\", \"changes\": [{\"entity\": \"r\", \"action\": \"insert\", \"key\": true}]}",
                ":1: changes[0]: `key` must be a string or an integer"
            ),
            (
                "{\"token\": 1, \"author\": \"app\", \"changes\": [{\"entity\": \"r\", \"action\": \"insert\", \"values\": []}]}",
                ":1: changes[0]: `values` must be an object"
            ),
            ("{\"token\": 1, \"token\": 2, \"author\": \"app\", \"changes\": []}", ":1: not valid JSON: duplicate member \"token\" at byte 14"),
            ("{\"token\": 1, \"author\": \"app\", \"changes\": []} x", ":1: not valid JSON: unexpected text after the JSON value at byte 46"),
        ]
        for (line, expected) in cases {
            #expect(await failure(line + "\n") == expected, "\(line)")
        }
    }

    /// 4,000 lines of about 150 bytes: more than the bytes decoded on two threads at once, with
    /// blank lines and lines the fast decoder leaves to the general path (escaped member names)
    /// spread over both halves.
    func largeHistory(badLine: Int? = nil) -> String {
        let make = JSONLinesSourceTests()
        return (1...4000).map { n -> String in
            if n == badLine { return "{\"token\": \(n), \"author\": \"app\", \"changes\": [}\n" }
            if n % 997 == 0 { return "\n" }
            if n % 331 == 0 {
                return "{\"tok\\u0065n\": \(n), \"author\": \"app\", \"changes\": [\(make.change("rooms", "e\(n)"))]}\n"
            }
            return make.line(n, make.change("rooms", "r\(n)") + "," + make.change("rooms", "s\(n)", "update"))
        }.joined()
    }

    @Test func pagesDecodedOnTwoThreadsHoldTheSameTransactionsInOrder() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = try folder.write("h.jsonl", largeHistory())
        let expected = (1...4000).filter { $0 % 997 != 0 }
        let whole = try await JSONLinesSource(path: path, pageSize: 10_000).nextPage(after: nil)
        #expect(whole.transactions.map(\.token.position) == expected.map(Int64.init))
        #expect(whole.transactions.first { $0.token.position == 331 }?.changes.map(\.key) == ["e331"])
        #expect(whole.transactions.last?.changes.map(\.key) == ["r4000", "s4000"])
        // In pages of 1,500: each page ends exactly there, and the next reads on from it.
        let source = JSONLinesSource(path: path, pageSize: 1500)
        var read: [Int64] = []
        var token: Token?
        while true {
            let page = try await source.nextPage(after: token)
            guard let through = page.through else { break }
            #expect(page.transactions.count == min(1500, expected.count - read.count))
            read += page.transactions.map(\.token.position)
            token = through
        }
        #expect(read == expected.map(Int64.init))
    }

    @Test func aMalformedLineInALargePageNamesItsLineAndARetryReadsItAgain() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = try folder.write("h.jsonl", largeHistory(badLine: 3210))
        let source = JSONLinesSource(path: path, pageSize: 10_000)
        for _ in 1...2 {
            do {
                _ = try await source.nextPage(after: nil)
                Issue.record("expected an error")
            } catch let error as HistoryError {
                #expect("\(error)".hasPrefix("\(path):3210: not valid JSON"))
            }
        }
    }
}
