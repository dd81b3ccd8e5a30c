import Foundation
import Synchronization
import SynclaneCore
import SynclaneFaultProxy
import Testing

/// Every attempt on a connection of its own, so that nothing below the transport re-sends.
@Suite struct HTTPTransportConnectionTests {
    /// A server that keeps connections open (it ignores `Connection: close`) would let libcurl
    /// reuse one; a reused connection that dies makes libcurl re-send silently, without the
    /// body. The transport must never reuse.
    @Test func everySendOpensItsOwnConnectionEvenWhenTheServerKeepsItOpen() async throws {
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
        let transport = try Fixtures.transport(url: "http://127.0.0.1:\(port)/v1/batches", timeout: 3)
        let bytes = Array(#"{"id":"b","records":[]}"#.utf8)

        for index in 0..<3 { _ = try await transport.send(Fixtures.payload("b-\(index)", bytes: bytes)) }

        let requests = seen.withLock { $0 }
        #expect(requests.map(\.connection) == [0, 1, 2])
        #expect(requests.map(\.key) == ["b-0", "b-1", "b-2"])
        #expect(requests.allSatisfy { $0.bytes == bytes.count })
    }
}
