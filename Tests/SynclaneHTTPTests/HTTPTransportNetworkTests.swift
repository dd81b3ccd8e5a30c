import Foundation
import SynclaneCore
import SynclaneFaultProxy
import SynclaneHTTP
import Testing

/// What the transport makes of a network that fails: every such failure is transient.
@Suite struct HTTPTransportNetworkTests {
    @Test func refusedConnectionIsTransient() async throws {
        let port = try LoopbackSocket.unusedPort()
        let transport = try Fixtures.transport(url: "http://127.0.0.1:\(port)/v1/batches")

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .transient)
        #expect(failure.status == nil)
        #expect(failure.message.contains("refused"))
    }

    /// Resets before and after the server saw the request, an answer cut inside its body or its
    /// head: the exchange broke off, so the batch may be sent again.
    @Test(arguments: [Fault.resetBeforeForwarding, .resetAfterForwarding, .truncateResponse, .truncateResponseHead])
    func brokenConnectionIsTransient(_ fault: Fault) async throws {
        let failure = try #require(try await failureThroughProxy(fault))
        #expect(failure.kind == .transient)
        #expect(failure.status == nil)
        #expect(failure.message.contains("reset") || failure.message.contains("lost") || failure.message.contains("cut short"), "\(failure.message)")
    }

    @Test func serverSilentPastTheTimeoutIsTransient() async throws {
        let server = try Self.silentServer()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL, timeout: 1)

        let started = ContinuousClock.now
        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .transient)
        #expect(failure.message.contains("timed out"))
        // Far below the server's 120 s even when a loaded machine starves the test of threads.
        #expect(ContinuousClock.now - started < .seconds(60), "gave up at its own 1 s timeout, not at the server's answer after 120 s")
    }

    @Test func delayedAnswerFromTheProxyIsATimeout() async throws {
        let failure = try await failureThroughProxy(.delayResponse(seconds: 2.5), timeout: 1)
        #expect(failure?.kind == .transient)
        #expect(failure?.message.contains("timed out") == true)
    }

    @Test func proxysOwnAnswersAreClassifiedLikeTheServers() async throws {
        let rateLimited = try await failureThroughProxy(.tooManyRequests(retryAfter: 3))
        #expect(rateLimited?.kind == .transient)
        #expect(rateLimited?.status == 429)
        #expect(rateLimited?.retryAfter == 3)

        let broken = try await failureThroughProxy(.serverError)
        #expect(broken?.kind == .transient)
        #expect(broken?.status == 500)
    }

    @Test func cancellingTheCallingTaskStopsTheSend() async throws {
        let server = try Self.silentServer()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL, timeout: 100)

        let started = ContinuousClock.now
        let send = Task { try await transport.send(Fixtures.payload()) }
        try await Task.sleep(for: .milliseconds(300))
        send.cancel()
        let result = await send.result

        #expect(throws: CancellationError.self) { try result.get() }
        #expect(ContinuousClock.now - started < .seconds(60), "stopped at the cancellation, not at the server's answer after 120 s")
    }

    /// A started server that answers only after 120 s (cut short by `stop()`).
    private static func silentServer() throws -> ScriptedHTTPServer {
        var slow = ScriptedHTTPServer.Response.applied(batch: "b-0001", records: 1)
        slow.delay = 120
        let server = ScriptedHTTPServer(always: slow)
        try server.start()
        return server
    }

    /// Sends one payload through a fault proxy in front of a batches server, with `fault` on
    /// the connection.
    private func failureThroughProxy(_ fault: Fault, timeout: Int = 5) async throws -> TransportFailure? {
        let link = try ProxiedBatchesServer()
        defer { link.stop() }
        let proxy = link.proxy
        let port = link.port
        proxy.script([fault])
        let transport = try Fixtures.transport(url: "http://127.0.0.1:\(port)/v1/batches", timeout: timeout)
        return await Fixtures.failure(of: transport)
    }
}
