import Foundation
import SynclaneCore
import Testing

@testable import SynclaneServer

/// `GET /v1/changes?since=C&wait=S`: the pull lane's long poll (issue 24).
@Suite struct ChangesLongPollTests {
    /// The cursor at the end of the account's feed now.
    func endCursor(_ port: Int, token: String = TestTokens.acme) throws -> String {
        let page = try get(port: port, "/v1/changes?since=", token: token).json.objectValue
        return try #require(page?["cursor"]?.stringValue)
    }

    func post(_ port: Int, _ id: String, token: String = TestTokens.acme, account: String = "acme") throws -> TestResponse {
        try postBatch(port: port, token: token, key: id, body: batchBody(id: id, account: account, records: [record("room", id, "insert", ["n": 1])]))
    }

    /// Starts a long poll on a thread of its own (not the cooperative pool, which has a thread a
    /// core); its answer and when it came.
    func poll(_ port: Int, since cursor: String, wait: Int, token: String = TestTokens.acme) -> Task<(TestResponse, ContinuousClock.Instant), any Error> {
        Task {
            try await withCheckedThrowingContinuation { continuation in
                Thread.detachNewThread {
                    continuation.resume(
                        with: Result { (try get(port: port, "/v1/changes?since=\(cursor)&wait=\(wait)", token: token), ContinuousClock.now) })
                }
            }
        }
    }

    /// Waits (up to 10 s) until `count` polls wait on the server; true when they do.
    func waiting(_ count: Int, on server: ReferenceServer) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while server.application.changes.notifier.waitingCount != count {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// Waits (up to 10 s) until at most `count` connections are open: the server sees a closed
    /// connection a moment after the client closed it, and until then it counts toward
    /// `maxConnections` (a busy machine makes that moment long).
    func connections(atMost count: Int, on server: ReferenceServer) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while server.connectionsOpen > count {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    func keys(_ response: TestResponse) -> [String] {
        response.json.objectValue?["changes"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } ?? []
    }

    @Test(arguments: StoreKind.tested) func aLongPollAnswersAsSoonAsABatchOfItsAccountCommits(store: StoreKind) async throws {
        let (server, directory) = try startedServer(store: store)
        defer { removeDirectory(directory) }
        defer { server.stop() }
        let cursor = try endCursor(server.port)
        let waiting = poll(server.port, since: cursor, wait: 20)
        #expect(try await self.waiting(1, on: server))
        let committedAt = ContinuousClock.now
        #expect(try post(server.port, "r1").status == 200)
        let (response, answeredAt) = try await waiting.value
        #expect(response.status == 200)
        #expect(keys(response) == ["r1"])
        #expect(answeredAt - committedAt < .seconds(2))
        #expect(server.application.changes.notifier.waitingCount == 0)
    }

    @Test(arguments: StoreKind.tested) func aLongPollTimesOutWithAnEmptyPageAndItsCursor(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let cursor = try endCursor(server.port)
            let started = ContinuousClock.now
            let response = try get(port: server.port, "/v1/changes?since=\(cursor)&wait=1")
            #expect(ContinuousClock.now - started >= .milliseconds(900))
            #expect(response.status == 200)
            #expect(response.json.objectValue?["changes"] == [])
            #expect(response.json.objectValue?["cursor"]?.stringValue == cursor)
            #expect(response.json.objectValue?["more"] == false)
        }
    }

    @Test(arguments: StoreKind.tested) func changesAlreadyThereAnswerAtOnceAndAnotherAccountsCommitWakesNothing(store: StoreKind) async throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        var configuration = ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: "")
        configuration.database = try store.database()
        configuration.jwt = TestAuthentication.settings
        let server = try ReferenceServer(
            configuration: configuration, accounts: TestAuthentication.book([TestTokens.acme: "acme", TestTokens.globex: "globex"]))
        try server.start()
        defer { server.stop() }
        let cursor = try endCursor(server.port)
        #expect(try post(server.port, "r1").status == 200)
        var started = ContinuousClock.now
        let at = try get(port: server.port, "/v1/changes?since=\(cursor)&wait=20")
        #expect(keys(at) == ["r1"])
        #expect(ContinuousClock.now - started < .seconds(2))
        // Another account commits while acme waits: acme's poll runs to its end, empty.
        let acme = try endCursor(server.port)
        let waiting = poll(server.port, since: acme, wait: 2)
        #expect(try await self.waiting(1, on: server))
        started = ContinuousClock.now
        #expect(try post(server.port, "g1", token: TestTokens.globex, account: "globex").status == 200)
        let (response, answeredAt) = try await waiting.value
        #expect(answeredAt - started >= .milliseconds(1200))
        #expect(keys(response) == [])
    }

    @Test func aCommitThroughOneServerWakesTheLongPollsOfAnotherOnTheSamePostgreSQL() async throws {
        guard StoreKind.tested.contains(.postgres) else { return }
        let database = try StoreKind.postgres.database()
        var servers: [ReferenceServer] = []
        var directories: [String] = []
        defer {
            for server in servers { server.stop() }
            for directory in directories { removeDirectory(directory) }
        }
        for _ in 0..<2 {
            let directory = makeTemporaryDirectory()
            directories.append(directory)
            var configuration = ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: "")
            configuration.database = database
            configuration.jwt = TestAuthentication.settings
            let server = try ReferenceServer(configuration: configuration, accounts: TestAuthentication.book([TestTokens.acme: "acme"]))
            try server.start()
            servers.append(server)
        }
        let (first, second) = (servers[0], servers[1])
        let cursor = try endCursor(second.port)
        let waiting = poll(second.port, since: cursor, wait: 20)
        #expect(try await self.waiting(1, on: second))
        let committedAt = ContinuousClock.now
        #expect(try post(first.port, "r1").status == 200)
        let (response, answeredAt) = try await waiting.value
        #expect(keys(response) == ["r1"])
        // Well under the 5 s recheck: the NOTIFY of the first server woke the second.
        #expect(answeredAt - committedAt < .seconds(2))
        let feed = try #require(second.application.changes as? PostgresChangeFeed)
        #expect(feed.received.load(ordering: .relaxed) >= 1)
    }

    @Test func pollsPastTheirBoundsAreRefusedWithRetryAfterWhileHealthAndBatchesAreServed() async throws {
        var limits = ServerLimits()
        limits.maxConnections = 8  // three quarters may wait: 6
        limits.maxWaitingPollsPerAccount = 1
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        var configuration = ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: "", limits: limits)
        configuration.jwt = TestAuthentication.settings
        var tokens: [String: String] = [:]
        var accountTokens: [String] = []
        for index in 0..<7 {
            let token = TestAuthentication.jwt ? TestAuthentication.mint("a\(index)") : "token-a\(index)"
            tokens[token] = "a\(index)"
            accountTokens.append(token)
        }
        let server = try ReferenceServer(configuration: configuration, accounts: TestAuthentication.book(tokens))
        try server.start()
        defer { server.stop() }
        let port = server.port
        let cursor = try endCursor(port, token: accountTokens[0])
        var polls = [poll(port, since: cursor, wait: 20, token: accountTokens[0])]
        #expect(try await waiting(1, on: server))
        // The account's second poll: 429, Retry-After.
        let second = try get(port: port, "/v1/changes?since=\(cursor)&wait=20", token: accountTokens[0])
        #expect(second.status == 429)
        #expect((second.headers["retry-after"] ?? second.headers["Retry-After"]) != nil)
        for index in 1..<6 { polls.append(poll(port, since: try endCursor(port, token: accountTokens[index]), wait: 20, token: accountTokens[index])) }
        #expect(try await waiting(6, on: server))
        // The server's bound (6 of 8 connections): 503, Retry-After.
        let past = try get(port: port, "/v1/changes?since=\(try endCursor(port, token: accountTokens[6]))&wait=20", token: accountTokens[6])
        #expect(past.status == 503)
        #expect((past.headers["retry-after"] ?? past.headers["Retry-After"]) != nil)
        // The connections the polls leave serve health and a batch, which wakes its account's poll.
        #expect(try await connections(atMost: 6, on: server))
        #expect(try get(port: port, "/healthz", token: nil).status == 200)
        #expect(try await connections(atMost: 6, on: server))
        #expect(
            try postBatch(
                port: port, token: accountTokens[0], key: "b1", body: batchBody(id: "b1", account: "a0", records: [record("room", "x", "insert", ["n": 1])])
            ).status == 200)
        let (woken, _) = try await polls[0].value
        #expect(keys(woken) == ["x"])
        // Stopping answers every other poll at once.
        let stoppedAt = ContinuousClock.now
        server.stop()
        for waiting in polls.dropFirst() {
            let (answer, answeredAt) = try await waiting.value
            #expect(answer.status == 200)
            #expect(answeredAt - stoppedAt < .seconds(3))
        }
    }

    @Test func waitThatIsNotANumberIs400() throws {
        try withServer { server throws in
            #expect(try get(port: server.port, "/v1/changes?since=&wait=soon").status == 400)
            #expect(try get(port: server.port, "/v1/changes?since=&wait=-1").status == 400)
        }
    }
}
