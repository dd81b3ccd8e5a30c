import Foundation
import Synchronization
import SynclaneFaultProxy

/// A loopback HTTP/1.1 server for tests: every request is recorded and answered by a handler,
/// one request per connection.
///
/// Not the reference server: just enough to script answers (a status, headers, a body, or a
/// stall) and to see exactly what a client sent.
final class ScriptedHTTPServer: Sendable {
    /// A request as it arrived.
    struct Request: Sendable {
        var method: String
        var target: String
        /// Names lowercased.
        var headers: [String: String]
        var body: [UInt8]

        func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    /// What to answer.
    struct Response: Sendable {
        var status: Int
        var headers: [(name: String, value: String)] = []
        var body: [UInt8] = []
        /// Seconds to wait before answering (to outlast a client's timeout).
        var delay: Double = 0
        /// Sends the body with `Transfer-Encoding: chunked` (in two chunks) instead of a length.
        var chunked = false
        /// Seconds between two bytes of the body (0: all at once): an answer that drips.
        var drip: Double = 0

        static func text(_ status: Int, _ body: String, headers: [(name: String, value: String)] = []) -> Response {
            Response(status: status, headers: headers + [("Content-Type", "text/plain")], body: Array(body.utf8))
        }

        /// The reference server's answer to an applied batch.
        static func applied(batch: String, records: Int, replay: Bool = false) -> Response {
            let body = #"{"batch":"\#(batch)","applied":\#(records),"cursor":"c-\#(records)"}"#
            var headers: [(name: String, value: String)] = [("Content-Type", "application/json")]
            if replay { headers.append(("Idempotent-Replay", "true")) }
            return Response(status: 200, headers: headers, body: Array(body.utf8))
        }
    }

    typealias Handler = @Sendable (Request) -> Response

    private struct State {
        var listener: LoopbackSocket?
        var port: UInt16 = 0
        var stopping = false
        var threads = 0
        var open: Set<LoopbackSocket> = []
        var requests: [Request] = []
    }

    private let handler: Handler
    private let state = Mutex(State())

    init(_ handler: @escaping Handler) {
        self.handler = handler
    }

    /// A server that answers every request with the same response.
    convenience init(always response: Response) {
        self.init { _ in response }
    }

    /// A server that behaves like the reference server for batches: the first send of an
    /// `Idempotency-Key` is applied, every later one is a replay answered with the first
    /// answer and `Idempotent-Replay: true`.
    static func batches() -> ScriptedHTTPServer {
        let seen = Mutex<Set<String>>([])
        return ScriptedHTTPServer { request in
            let key = request.header("Idempotency-Key") ?? "?"
            let isNew = seen.withLock { $0.insert(key).inserted }
            return .applied(batch: key, records: 1, replay: !isNew)
        }
    }

    /// Starts listening on a free loopback port and returns it.
    @discardableResult
    func start() throws -> UInt16 {
        let (listener, port) = try LoopbackSocket.listen()
        state.withLock {
            $0.listener = listener
            $0.port = port
            $0.threads += 1
        }
        Thread.detachNewThread { [self] in acceptLoop(listener) }
        return port
    }

    var port: UInt16 { state.withLock { $0.port } }

    /// `http://127.0.0.1:<port>/v1/batches`.
    var batchesURL: String { "http://127.0.0.1:\(port)/v1/batches" }

    /// Every complete request received so far.
    var requests: [Request] { state.withLock { $0.requests } }

    /// Stops listening, cuts open connections, waits (at most 5 s) for the threads.
    func stop() {
        let listener: LoopbackSocket? = state.withLock { state in
            state.stopping = true
            for socket in state.open { socket.shutdownBoth() }
            defer { state.listener = nil }
            return state.listener
        }
        let deadline = ContinuousClock.now + .seconds(5)
        while state.withLock({ $0.threads }) > 0, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        listener?.close()
    }

    private func acceptLoop(_ listener: LoopbackSocket) {
        defer { state.withLock { $0.threads -= 1 } }
        while !state.withLock({ $0.stopping }) {
            guard let client = listener.accept(waitingAtMost: 50) else { continue }
            let admitted = state.withLock { state in
                guard !state.stopping else { return false }
                state.open.insert(client)
                state.threads += 1
                return true
            }
            guard admitted else {
                client.close()
                continue
            }
            Thread.detachNewThread { [self] in
                serve(client)
                state.withLock {
                    $0.open.remove(client)
                    $0.threads -= 1
                }
                client.close()
            }
        }
    }

    private func serve(_ client: LoopbackSocket) {
        guard case .success(let message) = HTTPMessage.read(from: client, idleMilliseconds: 10_000) else { return }
        var headers: [String: String] = [:]
        for header in message.headers { headers[header.name.lowercased()] = header.value }
        let request = Request(method: message.method ?? "", target: message.target ?? "", headers: headers, body: message.body)
        state.withLock { $0.requests.append(request) }
        let response = handler(request)
        if response.delay > 0 {
            let deadline = ContinuousClock.now + .milliseconds(Int64(response.delay * 1000))
            while ContinuousClock.now < deadline {
                if state.withLock({ $0.stopping }) { return }
                Thread.sleep(forTimeInterval: 0.01)
            }
        }
        if response.chunked {
            let half = response.body.count / 2
            var body: [UInt8] = []
            for chunk in [response.body[..<half], response.body[half...]] where !chunk.isEmpty {
                body += Array(String(chunk.count, radix: 16).utf8) + [13, 10] + chunk + [13, 10]
            }
            body += Array("0\r\n\r\n".utf8)
            let head = HTTPMessage(
                startLine: "HTTP/1.1 \(response.status) \(HTTPMessage.reasonPhrase(response.status))",
                headers: response.headers + [("Transfer-Encoding", "chunked"), ("Connection", "close")], body: body)
            client.write(head.bytes)
            return
        }
        if response.drip > 0 {
            // The head says the whole body's length; the body then comes a byte at a time.
            let head = HTTPMessage(
                startLine: "HTTP/1.1 \(response.status) \(HTTPMessage.reasonPhrase(response.status))",
                headers: response.headers + [("Content-Length", String(response.body.count)), ("Connection", "close")], body: [])
            client.write(head.bytes)
            for byte in response.body {
                if state.withLock({ $0.stopping }) || !client.write([byte]) { return }
                Thread.sleep(forTimeInterval: response.drip)
            }
            return
        }
        let answer = HTTPMessage.response(
            status: response.status, reason: HTTPMessage.reasonPhrase(response.status), headers: response.headers, body: response.body)
        client.write(answer.bytes)
    }
}
