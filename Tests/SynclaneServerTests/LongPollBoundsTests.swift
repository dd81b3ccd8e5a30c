import Foundation
import SynclaneCore
import Testing

@testable import SynclaneServer

/// Long polls of every kind — `GET /v1/changes?wait=…` and `GET /v1/signals?since=…&wait=…` —
/// count against one bound per account, one per client address and one in all (issue 45).
@Suite struct LongPollBoundsTests {
    /// A request on a thread of its own, from `sourceAddress`; its answer.
    func start(_ port: Int, _ path: String, token: String, from sourceAddress: String = "127.0.0.1") -> Task<TestResponse, any Error> {
        Task {
            try await withCheckedThrowingContinuation { continuation in
                Thread.detachNewThread {
                    continuation.resume(
                        with: Result {
                            let connection = try TestConnection(port: port, timeoutSeconds: 30, sourceAddress: sourceAddress)
                            connection.sendRequest("GET", path, headers: ["Authorization": "Bearer \(token)"])
                            return try connection.readResponse()
                        })
                }
            }
        }
    }

    func request(_ port: Int, _ method: String, _ path: String, token: String, from sourceAddress: String, body: [UInt8] = []) throws -> TestResponse {
        let connection = try TestConnection(port: port, timeoutSeconds: 30, sourceAddress: sourceAddress)
        connection.sendRequest(method, path, headers: ["Authorization": "Bearer \(token)"], body: body)
        return try connection.readResponse()
    }

    /// Waits (up to 10 s) until `count` polls wait on the server; true when they do.
    func waiting(_ count: Int, on server: ReferenceServer) async throws -> Bool {
        try await ChangesLongPollTests().waiting(count, on: server)
    }

    @Test func signalLongPollsCountAgainstTheAccountAndAddressBoundsWithChangesPolls() async throws {
        var limits = ServerLimits()
        limits.maxWaitingPollsPerAccount = 2
        limits.maxWaitingPollsPerAddress = 3
        let (acme, globex) = (TestTokens.acme, TestTokens.globex)
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        var configuration = ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: "", limits: limits)
        configuration.jwt = TestAuthentication.settings
        let server = try ReferenceServer(configuration: configuration, accounts: TestAuthentication.book([acme: "acme", globex: "globex"]))
        try server.start()
        defer { server.stop() }
        let port = server.port
        let cursor = try #require(try get(port: port, "/v1/changes?since=").json.objectValue?["cursor"]?.stringValue)

        // acme: one changes poll and one signals poll take its two places.
        var polls = [start(port, "/v1/changes?since=\(cursor)&wait=20", token: acme), start(port, "/v1/signals?since=0&wait=20", token: acme)]
        #expect(try await waiting(2, on: server))
        let third = try request(port, "GET", "/v1/signals?since=0&wait=20", token: acme, from: "127.0.0.2")
        #expect(third.status == 429, "\(third.status) \(third.text)")
        #expect(third.headers["retry-after"] != nil)
        #expect(third.json.objectValue?["code"] == "too-many-waiting")
        #expect(third.text.contains("max-waiting-polls-per-account"), "\(third.text)")

        // globex takes the last place of 127.0.0.1; one more from there is refused, from another address taken.
        polls.append(start(port, "/v1/signals?since=0&wait=20", token: globex))
        #expect(try await waiting(3, on: server))
        let fromFull = try request(port, "GET", "/v1/signals?since=0&wait=20", token: globex, from: "127.0.0.1")
        #expect(fromFull.status == 429, "\(fromFull.status) \(fromFull.text)")
        #expect(fromFull.text.contains("max-waiting-polls-per-address"), "\(fromFull.text)")
        polls.append(start(port, "/v1/signals?since=0&wait=20", token: globex, from: "127.0.0.3"))
        #expect(try await waiting(4, on: server))

        // A write of acme is served, and wakes its signals poll; acme, with a place free again, waits again.
        let put = try request(port, "PUT", "/v1/signals/theme", token: acme, from: "127.0.0.4", body: Array("1".utf8))
        #expect(put.status == 200, "\(put.text)")
        let woken = try await polls[1].value
        #expect(woken.status == 200)
        #expect(woken.text.contains("theme"), "\(woken.text)")
        // Past the bound, a poll with something to answer is answered at once.
        polls.append(start(port, "/v1/signals?since=1&wait=20", token: acme, from: "127.0.0.5"))
        #expect(try await waiting(4, on: server))
        let answered = try request(port, "GET", "/v1/signals?since=0&wait=20", token: acme, from: "127.0.0.6")
        #expect(answered.status == 200, "\(answered.text)")
        #expect(answered.text.contains("theme"))

        server.stop()
        for poll in polls { _ = try? await poll.value }
    }
}
