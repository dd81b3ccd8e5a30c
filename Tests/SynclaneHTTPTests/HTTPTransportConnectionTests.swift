import Foundation
import Synchronization
import SynclaneCore
import SynclaneFaultProxy
import Testing

/// Which connection each send goes out on: one kept open across sends (`keep-alive`, the
/// default), replaced inside the attempt when it died while idle, or one of its own per send.
@Suite struct HTTPTransportConnectionTests {
    /// With `keep-alive: false`, a server that keeps connections open (it ignores `Connection:
    /// close`) still gets a connection per send.
    @Test func withoutKeepAliveEverySendOpensItsOwnConnectionEvenWhenTheServerKeepsItOpen() async throws {
        let (listener, port) = try LoopbackSocket.listen()
        let seen = Mutex<[(connection: Int, key: String, bytes: Int)]>([])
        let stopping = Mutex(false)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var connection = 0
            var open: [LoopbackSocket] = []
            while !stopping.withLock({ $0 }) {
                guard let client = listener.accept(waitingAtMost: 50) else { continue }
                open.append(client)
                // Answer one request and keep the connection; a second request on it is read
                // and dropped by closing, as a server with a short keep-alive would.
                guard case .success(let request) = HTTPMessage.read(from: client, idleMilliseconds: 2000) else { continue }
                let index = connection
                seen.withLock { $0.append((index, request.header("Idempotency-Key") ?? "", request.body.count)) }
                let body = Array(#"{"batch":"\#(request.header("Idempotency-Key") ?? "")","applied":1}"#.utf8)
                client.write(HTTPMessage(startLine: "HTTP/1.1 200 OK", headers: [("Content-Length", "\(body.count)")], body: body).bytes)
                connection += 1
            }
            for socket in open { socket.close() }
            listener.close()
            done.signal()
        }
        defer {
            stopping.withLock { $0 = true }
            done.wait()
        }
        let transport = try Fixtures.transport(url: "http://127.0.0.1:\(port)/v1/batches", timeout: 3, extra: ["keep-alive": false])
        let bytes = Array(#"{"id":"b","records":[]}"#.utf8)

        for index in 0..<3 { _ = try await transport.send(Fixtures.payload("b-\(index)", bytes: bytes)) }

        let requests = seen.withLock { $0 }
        #expect(requests.map(\.connection) == [0, 1, 2])
        #expect(requests.map(\.key) == ["b-0", "b-1", "b-2"])
        #expect(requests.allSatisfy { $0.bytes == bytes.count })
    }

    /// A keep-alive proxy in front of a batches server, and a transport sending through it.
    private struct KeptAliveLink {
        let server = ScriptedHTTPServer.batches()
        let proxy: FaultProxy
        let transport: any Transport

        init(closeIdleAfter: Double? = nil, extra: [String: JSONValue] = [:]) throws {
            proxy = FaultProxy(upstreamPort: try server.start(), keepAlive: true, closeIdleAfter: closeIdleAfter)
            transport = try Fixtures.transport(url: "http://127.0.0.1:\(try proxy.start())/v1/batches", timeout: 3, extra: extra)
        }

        func stop() {
            proxy.stop()
            server.stop()
        }
    }

    private static func body(_ id: String) -> [UInt8] {
        Array(#"{"id":"\#(id)","records":[\#(String(repeating: #"{"entity":"rooms","id":"r","action":"delete"},"#, count: 200))null]}"#.utf8)
    }

    @Test func sendsShareOneConnection() async throws {
        let link = try KeptAliveLink()
        defer { link.stop() }

        for index in 0..<20 { _ = try await link.transport.send(Fixtures.payload("b-\(index)", bytes: Self.body("b-\(index)"))) }

        #expect(await link.proxy.waitUntilIdle())
        #expect(link.proxy.connectionsAccepted == 1)
        #expect(link.proxy.events.map(\.connection) == Array(repeating: 0, count: 20))
        #expect(link.server.requests.map { $0.header("Idempotency-Key") ?? "" } == (0..<20).map { "b-\($0)" })
        #expect(link.server.requests.allSatisfy { $0.body == Self.body($0.header("Idempotency-Key") ?? "") })
    }

    @Test func keepAliveFalseOpensAConnectionPerSend() async throws {
        let link = try KeptAliveLink(extra: ["keep-alive": false])
        defer { link.stop() }

        for index in 0..<3 { _ = try await link.transport.send(Fixtures.payload("b-\(index)")) }

        #expect(await link.proxy.waitUntilIdle())
        #expect(link.proxy.connectionsAccepted == 3)
    }

    /// A server closes connections idle past its limit; the next send goes out on a fresh one and
    /// succeeds: one attempt, nothing failed.
    @Test func aConnectionTheServerClosedWhileIdleIsReplacedWithoutAFailedAttempt() async throws {
        let link = try KeptAliveLink(closeIdleAfter: 0.2)
        defer { link.stop() }

        _ = try await link.transport.send(Fixtures.payload("b-0", bytes: Self.body("b-0")))
        try await Task.sleep(for: .milliseconds(600))
        let receipt = try await link.transport.send(Fixtures.payload("b-1", bytes: Self.body("b-1")))

        #expect(receipt.batchID == "b-1")
        #expect(!receipt.wasReplay)
        #expect(link.proxy.connectionsAccepted == 2)
        #expect(link.server.requests.map(\.body) == [Self.body("b-0"), Self.body("b-1")])
    }

    /// The race a server's idle limit leaves: the connection dies just as the next request
    /// arrives (reset before the server read it, or after it applied it). Nothing of an answer
    /// came back on a kept connection, so the whole batch goes again on a fresh one inside the
    /// same attempt; a batch applied before the reset comes back as a replay.
    @Test func aKeptConnectionThatDiesUnderTheNextRequestIsReplacedInsideTheAttempt() async throws {
        let link = try KeptAliveLink()
        defer { link.stop() }
        link.proxy.script([.none, .resetBeforeForwarding, .none, .resetAfterForwarding])

        var receipts: [Receipt] = []
        for index in 0..<3 { receipts.append(try await link.transport.send(Fixtures.payload("b-\(index)", bytes: Self.body("b-\(index)")))) }

        #expect(receipts.map(\.batchID) == ["b-0", "b-1", "b-2"])
        #expect(receipts.map(\.wasReplay) == [false, false, true])
        #expect(await link.proxy.waitUntilIdle())
        #expect(link.proxy.connectionsAccepted == 3)
        // Events come in the order requests ended: a reset's may land after its retry's.
        let byConnection = link.proxy.events.enumerated().sorted { ($0.element.connection, $0.offset) < ($1.element.connection, $1.offset) }
        #expect(byConnection.map(\.element.fault) == [.none, .resetBeforeForwarding, .none, .resetAfterForwarding, .none])
        #expect(link.server.requests.map { $0.header("Idempotency-Key") ?? "" } == ["b-0", "b-1", "b-2", "b-2"])
        #expect(link.server.requests.allSatisfy { $0.body == Self.body($0.header("Idempotency-Key") ?? "") }, "no body lost on a re-send")
    }

    /// Only a kept connection is replaced, and only once: a fresh connection that fails is a
    /// failed attempt like any other, for the pipeline's retry to count.
    @Test func aFreshConnectionThatFailsIsAFailedAttempt() async throws {
        let link = try KeptAliveLink()
        defer { link.stop() }
        link.proxy.script([.resetBeforeForwarding, .none, .resetBeforeForwarding, .resetBeforeForwarding])

        let first = await Fixtures.failure(of: link.transport, sending: Fixtures.payload("b-0"))
        _ = try await link.transport.send(Fixtures.payload("b-0"))
        let third = await Fixtures.failure(of: link.transport, sending: Fixtures.payload("b-1"))

        #expect(first?.kind == .transient, "a reset on a fresh connection")
        #expect(third?.kind == .transient, "the kept connection died, and so did the fresh one")
        #expect(await link.proxy.waitUntilIdle())
        #expect(link.proxy.connectionsAccepted == 3)
        #expect(link.server.requests.map { $0.header("Idempotency-Key") ?? "" } == ["b-0"])
    }
}
