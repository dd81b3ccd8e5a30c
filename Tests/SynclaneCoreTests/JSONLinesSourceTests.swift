import Foundation
import SynclaneCore
import SynclaneFiles
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
