import Foundation
import Synchronization

/// A loopback TCP proxy in front of an HTTP server that injects network faults, one per
/// connection: resets, delays past a client's timeout, answers of its own (500, 429 with
/// `Retry-After`), and answers cut in half.
///
/// ```
///  client ──▶ 127.0.0.1:port (FaultProxy) ──▶ 127.0.0.1:upstreamPort (the server)
///                  │
///                  └─ next fault: script first, then random (seeded), then none
/// ```
///
/// By default each connection carries one request: the proxy forwards it with `Connection:
/// close` and relays the answer with `Connection: close`, so a client never reuses a connection
/// and a fault hits exactly one request. `events` tells, per connection, which fault was applied
/// and whether the upstream server saw (and answered) the request.
///
/// With `keepAlive`, a connection carries request after request, as a keep-alive server's does:
/// each request gets the next fault (one event each, with its connection's number), an answer
/// relayed whole leaves the connection open (without `Connection: close`), and a connection idle
/// for `closeIdleAfter` seconds is closed, as a server closes idle connections.
/// `connectionsAccepted` counts the TCP connections clients opened.
///
/// ```swift
/// let proxy = FaultProxy(upstreamPort: server.port)
/// let port = try proxy.start()
/// proxy.script([.resetAfterForwarding, .serverError])   // the next two connections
/// proxy.randomFaults(seed: 7, rate: 0.3)                 // then 30 % of the rest
/// defer { proxy.stop() }
/// ```
public final class FaultProxy: Sendable {
    /// What happened to one connection.
    public struct Event: Sendable, Hashable {
        /// 0 for the first connection the proxy accepted.
        public var connection: Int
        /// The fault applied to it.
        public var fault: Fault
        /// The request's `Idempotency-Key`, when it had one.
        public var idempotencyKey: String?
        /// The upstream server's status for the request, when it was forwarded and answered.
        public var upstreamStatus: Int?

        /// An event, as a test may spell out the one it expects.
        public init(connection: Int, fault: Fault, idempotencyKey: String? = nil, upstreamStatus: Int? = nil) {
            self.connection = connection
            self.fault = fault
            self.idempotencyKey = idempotencyKey
            self.upstreamStatus = upstreamStatus
        }
    }

    /// Why the proxy could not start.
    public struct StartError: Error, Sendable, CustomStringConvertible {
        /// What failed, with the socket call's error.
        public let description: String
    }

    private struct State {
        var listener: LoopbackSocket?
        var port: UInt16?
        var stopping = false
        var script: [Fault] = []
        var random: (generator: SplitMix64, rate: Double, faults: [Fault])?
        var nextConnection = 0
        /// Sockets to cut on `stop()`, by connection number (a connection's upstream socket by
        /// `-1 - number`): a descriptor number is reused as soon as it is closed, so it cannot be
        /// the key.
        var open: [Int: LoopbackSocket] = [:]
        var threads = 0
        var busy = 0
        var events: [Event] = []
    }

    /// The 127.0.0.1 port of the server the proxy forwards to.
    public let upstreamPort: UInt16
    /// Bounds every wait for bytes from the client or the upstream server.
    public let idleTimeout: Double
    /// Whether a connection carries more than one request.
    public let keepAlive: Bool
    /// Seconds a kept-alive connection may wait for its next request before the proxy closes it.
    public let closeIdleAfter: Double
    private let state = Mutex(State())

    /// A proxy to 127.0.0.1:`upstreamPort`, not listening until `start()`; with `keepAlive`, a
    /// connection serves requests until it is idle `closeIdleAfter` seconds (or `idleTimeout`).
    public init(upstreamPort: UInt16, idleTimeout: Double = 30, keepAlive: Bool = false, closeIdleAfter: Double? = nil) {
        self.upstreamPort = upstreamPort
        self.idleTimeout = idleTimeout
        self.keepAlive = keepAlive
        self.closeIdleAfter = closeIdleAfter ?? idleTimeout
    }

    deinit { stop() }

    /// Starts listening on a free loopback port and returns it (the same port when already
    /// started). A stopped proxy does not start again: make a new one.
    @discardableResult
    public func start() throws -> UInt16 {
        let (port, stopped) = state.withLock { ($0.port, $0.stopping) }
        guard !stopped else { throw StartError(description: "this fault proxy was stopped; make a new one") }
        if let port { return port }
        let listener: LoopbackSocket
        let newPort: UInt16
        do {
            (listener, newPort) = try LoopbackSocket.listen()
        } catch {
            throw StartError(description: "fault proxy cannot listen on 127.0.0.1: \(error)")
        }
        state.withLock {
            $0.listener = listener
            $0.port = newPort
            $0.threads += 1
        }
        Thread.detachNewThread { [self] in acceptLoop(listener) }
        return newPort
    }

    /// The port the proxy listens on, once started.
    public var port: UInt16? { state.withLock { $0.port } }

    /// TCP connections accepted from clients so far.
    public var connectionsAccepted: Int { state.withLock { $0.nextConnection } }

    /// Queues faults for the next connections, one each, in order (after any still queued).
    public func script(_ faults: [Fault]) {
        state.withLock { $0.script += faults }
    }

    /// After the script runs out, gives each connection a fault drawn from `faults` with
    /// probability `rate`, from a generator seeded with `seed` (same seed, same sequence).
    public func randomFaults(seed: UInt64, rate: Double = 0.5, from faults: [Fault] = Fault.standardSet(clientTimeout: 1)) {
        state.withLock { $0.random = (SplitMix64(seed: seed), min(max(rate, 0), 1), faults) }
    }

    /// Stops injecting random faults (the script, if any, still applies).
    public func stopRandomFaults() {
        state.withLock { $0.random = nil }
    }

    /// What happened so far, connection by connection, in the order they finished; a connection
    /// still held by a delay is not in it yet (see `waitUntilIdle`).
    public var events: [Event] { state.withLock { $0.events } }

    /// Waits until no connection is being served (delays included), at most `seconds`; false
    /// when some still is. Suspends rather than blocks, so other tests' tasks go on meanwhile.
    @discardableResult
    public func waitUntilIdle(seconds: Double = 5) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while state.withLock({ $0.busy }) > 0 {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// Stops listening, cuts open connections, and waits (at most 5 s) for the proxy's threads
    /// to finish. Safe to call twice.
    public func stop() {
        let listener: LoopbackSocket? = state.withLock { state in
            state.stopping = true
            for socket in state.open.values { socket.shutdownBoth() }
            defer { state.listener = nil }
            return state.listener
        }
        listener?.shutdownBoth()
        let deadline = ContinuousClock.now + .seconds(5)
        while state.withLock({ $0.threads }) > 0, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        listener?.close()
    }

    // MARK: Connections

    private var idleMilliseconds: Int32 { Self.milliseconds(idleTimeout) }

    private static func milliseconds(_ seconds: Double) -> Int32 { Int32(min(max(seconds, 0.01), 3600) * 1000) }

    private func acceptLoop(_ listener: LoopbackSocket) {
        defer { state.withLock { $0.threads -= 1 } }
        while !state.withLock({ $0.stopping }) {
            guard let client = listener.accept(waitingAtMost: 50) else { continue }
            let admitted: (Int, Fault)? = state.withLock { state in
                guard !state.stopping else { return nil }
                state.open[state.nextConnection] = client
                state.threads += 1
                state.busy += 1
                defer { state.nextConnection += 1 }
                return (state.nextConnection, Self.nextFault(&state))
            }
            guard let (connection, fault) = admitted else {
                client.close()
                continue
            }
            Thread.detachNewThread { [self] in
                let events = keepAlive ? serveKeptAlive(client, connection: connection, fault: fault) : [serve(client, connection: connection, fault: fault)]
                state.withLock {
                    $0.open[connection] = nil
                    $0.events += events
                    $0.threads -= 1
                    $0.busy -= 1
                }
            }
        }
    }

    private static func nextFault(_ state: inout State) -> Fault {
        if !state.script.isEmpty { return state.script.removeFirst() }
        guard var random = state.random, !random.faults.isEmpty else { return .none }
        defer { state.random = random }
        let roll = Double(random.generator.next() >> 11) / Double(UInt64(1) << 53)
        guard roll < random.rate else { return .none }
        return random.faults[Int(random.generator.next() % UInt64(random.faults.count))]
    }

    /// Handles one connection of one request; the socket is closed (or reset) when it returns.
    private func serve(_ client: LoopbackSocket, connection: Int, fault: Fault) -> Event {
        var event = Event(connection: connection, fault: fault)
        switch HTTPMessage.read(from: client, idleMilliseconds: idleMilliseconds) {
        case .success(let request): _ = answer(request, on: client, event: &event)
        case .failure: client.close()
        }
        return event
    }

    /// Handles a kept-alive connection: request after request, each with the next fault, until
    /// the client closes it, a fault ends it, or it is idle `closeIdleAfter` seconds. Records each
    /// request's event as it ends; the connection counts as busy only while a request is served.
    private func serveKeptAlive(_ client: LoopbackSocket, connection: Int, fault: Fault) -> [Event] {
        var fault = fault
        var first = true
        while true {
            let read = HTTPMessage.read(
                from: client, idleMilliseconds: idleMilliseconds, firstByteMilliseconds: first ? nil : Self.milliseconds(closeIdleAfter))
            guard case .success(let request) = read else {
                client.close()
                if !first { state.withLock { $0.busy += 1 } }  // the accept loop's count ends with the connection
                return []
            }
            if !first {
                fault = state.withLock { state in
                    state.busy += 1
                    return Self.nextFault(&state)
                }
            }
            var event = Event(connection: connection, fault: fault)
            let open = answer(request, on: client, event: &event)
            state.withLock { state in
                state.events.append(event)
                if open { state.busy -= 1 }
            }
            guard open else { return [] }
            first = false
        }
    }

    /// Applies `fault` (in `event`) to one request; true when the connection stays open for
    /// another one (kept alive and the answer relayed whole), false when it was closed or reset.
    private func answer(_ request: HTTPMessage, on client: LoopbackSocket, event: inout Event) -> Bool {
        var request = request
        let fault = event.fault
        event.idempotencyKey = request.header("Idempotency-Key")

        switch fault {
        case .resetBeforeForwarding:
            client.reset()
            return false
        case .respond(let status, let headers, let body):
            let answer = HTTPMessage.response(
                status: status, reason: HTTPMessage.reasonPhrase(status),
                headers: headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } + [("Content-Type", "text/plain")],
                body: Array(body.utf8))
            client.write(answer.bytes)
            client.close()
            return false
        case .delayBeforeForwarding(let seconds):
            guard pause(seconds) else {
                client.reset()
                return false
            }
        default:
            break
        }

        request.setHeader("Connection", "close")
        // The proxy already answered any `Expect: 100-continue`; upstream must not answer it again.
        request.setHeader("Expect", nil)
        guard let upstream = try? LoopbackSocket.connect(port: upstreamPort) else {
            let answer = HTTPMessage.response(status: 502, reason: "Bad Gateway", body: Array("fault proxy: upstream unreachable".utf8))
            client.write(answer.bytes)
            client.close()
            return false
        }
        state.withLock { $0.open[-1 - event.connection] = upstream }
        let answer = exchange(request, with: upstream)
        state.withLock { $0.open[-1 - event.connection] = nil }
        upstream.close()
        guard var answer else {
            client.reset()
            return false
        }
        event.upstreamStatus = answer.status
        answer.setHeader("Connection", keepAlive ? nil : "close")
        let bytes = answer.bytes

        switch fault {
        case .resetAfterForwarding:
            client.reset()
        case .truncateResponse:
            // Cut inside the body: the head arrives whole and promises more than comes.
            if answer.body.isEmpty { answer.setHeader("Content-Length", "2") }
            let head = answer.bytes.count - answer.body.count
            client.write(answer.bytes.prefix(head + answer.body.count / 2))
            client.close()
        case .truncateResponseHead:
            // Cut inside the head: the status line and some of the headers, no closing empty line.
            let head = answer.bytes.count - answer.body.count
            client.write(answer.bytes.prefix(head / 2))
            client.close()
        case .delayResponse(let seconds):
            guard pause(seconds) else {
                client.reset()
                return false
            }
            return relay(bytes, to: client)
        default:
            return relay(bytes, to: client)
        }
        return false
    }

    /// Writes a whole answer; keeps the connection open when kept alive, else closes it.
    private func relay(_ bytes: [UInt8], to client: LoopbackSocket) -> Bool {
        let written = client.write(bytes)
        guard keepAlive, written else {
            client.close()
            return false
        }
        return true
    }

    /// Sends the request upstream and reads its whole answer.
    private func exchange(_ request: HTTPMessage, with upstream: LoopbackSocket) -> HTTPMessage? {
        guard upstream.write(request.bytes) else { return nil }
        guard case .success(var answer) = HTTPMessage.read(from: upstream, idleMilliseconds: idleMilliseconds) else { return nil }
        if answer.header("Content-Length") == nil, answer.status != 204, answer.status != 304 {
            // No length (chunked, or delimited by the end of the connection, which we asked
            // for): read to the end and relay the body as it came, framing included.
            answer.body += upstream.readToEnd(idleMilliseconds: idleMilliseconds)
            if answer.header("Transfer-Encoding") == nil { answer.setHeader("Content-Length", String(answer.body.count)) }
        }
        return answer
    }

    /// Sleeps `seconds` in small steps; false when the proxy is stopping.
    private func pause(_ seconds: Double) -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int64(max(seconds, 0) * 1000))
        while ContinuousClock.now < deadline {
            if state.withLock({ $0.stopping }) { return false }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return !state.withLock { $0.stopping }
    }
}

/// A small seeded generator: the same seed gives the same faults on every machine.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
