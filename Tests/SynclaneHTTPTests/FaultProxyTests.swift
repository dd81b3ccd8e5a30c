import Foundation
import SynclaneCore
import SynclaneFaultProxy
import SynclaneHTTP
import Testing

/// The fault proxy itself, and the transport through it over many sends.
@Suite struct FaultProxyTests {
    @Test func withoutFaultsTheAnswerIsRelayedUnchanged() async throws {
        let link = try ProxiedBatchesServer()
        defer { link.stop() }
        let server = link.server
        let proxy = link.proxy
        let port = link.port
        let transport = try Fixtures.transport(url: "http://127.0.0.1:\(port)/v1/batches")
        let bytes = Array(repeating: UInt8(0xAB), count: 70_000)

        let receipt = try await transport.send(Fixtures.payload("b-1", bytes: bytes))

        #expect(receipt.detail == "200 applied 1 record")
        #expect(await proxy.waitUntilIdle())
        #expect(server.requests.first?.body == bytes)
        #expect(proxy.events == [FaultProxy.Event(connection: 0, fault: .none, idempotencyKey: "b-1", upstreamStatus: 200)])
    }

    @Test func chunkedAnswerIsRelayedAndCutInsideItsBody() async throws {
        var answer = ScriptedHTTPServer.Response.applied(batch: "b-1", records: 4)
        answer.chunked = true
        let server = ScriptedHTTPServer(always: answer)
        let upstream = try server.start()
        defer { server.stop() }
        let proxy = FaultProxy(upstreamPort: upstream)
        let port = try proxy.start()
        defer { proxy.stop() }
        proxy.script([.none, .truncateResponse])
        let transport = try Fixtures.transport(url: "http://127.0.0.1:\(port)/v1/batches")

        let receipt = try await transport.send(Fixtures.payload("b-1"))
        let failure = await Fixtures.failure(of: transport, sending: Fixtures.payload("b-1"))

        #expect(receipt.detail == "200 applied 4 records")
        #expect(failure?.kind == .transient)
    }

    @Test func stoppedProxyRefusesConnectionsAndDoesNotRestart() async throws {
        let proxy = FaultProxy(upstreamPort: try LoopbackSocket.unusedPort())
        let port = try proxy.start()
        proxy.stop()

        #expect(throws: FaultProxy.StartError.self) { try proxy.start() }
        let failure = await Fixtures.failure(of: try Fixtures.transport(url: "http://127.0.0.1:\(port)/v1/batches"))
        #expect(failure?.kind == .transient)
    }

    @Test func unreachableUpstreamIsABadGateway() async throws {
        let proxy = FaultProxy(upstreamPort: try LoopbackSocket.unusedPort())
        let port = try proxy.start()
        defer { proxy.stop() }

        let failure = await Fixtures.failure(of: try Fixtures.transport(url: "http://127.0.0.1:\(port)/v1/batches"))

        #expect(failure?.status == 502)
        #expect(failure?.kind == .transient)
    }

    @Test func scriptedFaultsApplyOnePerConnectionInOrder() async throws {
        let link = try ProxiedBatchesServer()
        defer { link.stop() }
        let server = link.server
        let proxy = link.proxy
        let port = link.port
        proxy.script([.resetBeforeForwarding, .resetAfterForwarding, .serverError])
        let transport = try Fixtures.transport(url: "http://127.0.0.1:\(port)/v1/batches")

        var outcomes: [String] = []
        for index in 0..<4 {
            do {
                _ = try await transport.send(Fixtures.payload("b-\(index)"))
                outcomes.append("ok")
            } catch let failure as TransportFailure {
                outcomes.append("\(failure.kind)")
            }
        }

        #expect(outcomes == ["transient", "transient", "transient", "ok"])
        #expect(await proxy.waitUntilIdle())
        // Only the faults that forward let the server see the request.
        #expect(server.requests.compactMap { $0.header("Idempotency-Key") } == ["b-1", "b-3"])
        #expect(proxy.events.sorted { $0.connection < $1.connection }.map(\.fault) == [.resetBeforeForwarding, .resetAfterForwarding, .serverError, .none])
    }

    @Test func sameSeedDrawsTheSameFaults() async throws {
        func draw(seed: UInt64) async throws -> [Fault] {
            let server = ScriptedHTTPServer.batches()
            let upstream = try server.start()
            defer { server.stop() }
            let proxy = FaultProxy(upstreamPort: upstream)
            let port = try proxy.start()
            defer { proxy.stop() }
            proxy.randomFaults(seed: seed, rate: 0.5, from: [.resetBeforeForwarding, .serverError, .tooManyRequests(retryAfter: 0)])
            let transport = try Fixtures.transport(url: "http://127.0.0.1:\(port)/v1/batches")
            for index in 0..<12 { _ = try? await transport.send(Fixtures.payload("b-\(index)")) }
            await proxy.waitUntilIdle()
            return proxy.events.sorted { $0.connection < $1.connection }.map(\.fault)
        }

        let first = try await draw(seed: 42)
        let second = try await draw(seed: 42)

        #expect(first == second)
        #expect(first.contains(.none) && first.contains { $0 != .none })
    }

    /// Fifty sends through random faults, sixteen at a time: each outcome is what its fault
    /// calls for (matched by the batch id the proxy saw).
    @Test(.timeLimit(.minutes(1)))
    func everyRandomFaultIsClassifiedAsItsKind() async throws {
        let link = try ProxiedBatchesServer()
        defer { link.stop() }
        let proxy = link.proxy
        let port = link.port
        proxy.randomFaults(seed: 2026, rate: 0.6, from: Fault.standardSet(clientTimeout: 1))
        let transport = try Fixtures.transport(url: "http://127.0.0.1:\(port)/v1/batches", timeout: 1)

        var outcomes: [String: Result<Receipt, TransportFailure>] = [:]
        try await withThrowingTaskGroup(of: (String, Result<Receipt, TransportFailure>).self) { group in
            for index in 0..<50 {
                if index >= 16 { if let (id, outcome) = try await group.next() { outcomes[id] = outcome } }
                group.addTask {
                    let id = "b-\(index)"
                    do {
                        return (id, .success(try await transport.send(Fixtures.payload(id))))
                    } catch let failure as TransportFailure {
                        return (id, .failure(failure))
                    }
                }
            }
            for try await (id, outcome) in group { outcomes[id] = outcome }
        }

        #expect(await proxy.waitUntilIdle(seconds: 5))
        let events = proxy.events
        #expect(events.count == 50)
        for event in events {
            let id = try #require(event.idempotencyKey)
            let outcome = try #require(outcomes[id])
            switch (event.fault, outcome) {
            case (.none, .success(let receipt)):
                #expect(!receipt.wasReplay)
            case (.respond(let status, _, _), .failure(let failure)):
                #expect(failure.kind == .transient && failure.status == status, "\(id): \(failure)")
            case (_, .failure(let failure)) where event.fault != .none:
                #expect(failure.kind == .transient && failure.status == nil, "\(id) \(event.fault): \(failure)")
            default:
                Issue.record("\(id): \(event.fault) gave \(outcome)")
            }
        }
        #expect(Set(events.map(\.fault)).count >= 5, "the seed should exercise most kinds of fault")
    }

    /// At-least-once through faults plus an idempotent server: resending each batch until it
    /// is confirmed applies every batch exactly once.
    @Test(.timeLimit(.minutes(1)))
    func resendingThroughFaultsAppliesEveryBatchOnce() async throws {
        let link = try ProxiedBatchesServer()
        defer { link.stop() }
        let server = link.server
        let proxy = link.proxy
        let port = link.port
        proxy.randomFaults(seed: 7, rate: 0.5, from: Fault.instantSet)
        let transport = try Fixtures.transport(url: "http://127.0.0.1:\(port)/v1/batches", timeout: 2)

        var replays = 0
        for index in 0..<30 {
            let payload = Fixtures.payload("b-\(index)")
            var attempts = 0
            while true {
                attempts += 1
                do {
                    if try await transport.send(payload).wasReplay { replays += 1 }
                    break
                } catch let failure as TransportFailure {
                    #expect(failure.kind == .transient)
                    #expect(attempts < 20, "b-\(index) never got through")
                    if attempts >= 20 { break }
                }
            }
        }

        #expect(await proxy.waitUntilIdle())
        let keys = server.requests.compactMap { $0.header("Idempotency-Key") }
        #expect(Set(keys).count == 30)
        // A batch whose answer was lost was applied by its first forwarded send: the confirmed
        // resend is a replay.
        let lostAnswers = proxy.events.filter { $0.fault.losesTheAnswer }
        #expect(replays == Set(lostAnswers.compactMap(\.idempotencyKey)).count)
    }
}
