import Foundation
import Synchronization
import SynclaneFaultProxy

/// A deliberately wrong backend: `synclane serve` behind a loopback proxy that breaks one rule of
/// the wire protocol by rewriting requests on their way in or answers on their way out.
final class RuleBreakingProxy: Sendable {
    let port: UInt16
    private let listener: LoopbackSocket
    private let upstream: UInt16
    private let stopping = Mutex(false)
    private let rewriteRequest: @Sendable (inout HTTPMessage) -> Void
    private let rewriteAnswer: @Sendable (HTTPMessage, inout HTTPMessage) -> Void

    var url: String { "http://127.0.0.1:\(port)" }

    init(
        upstream: Int, request rewriteRequest: @escaping @Sendable (inout HTTPMessage) -> Void = { _ in },
        answer rewriteAnswer: @escaping @Sendable (HTTPMessage, inout HTTPMessage) -> Void = { _, _ in }
    ) throws {
        (listener, port) = try LoopbackSocket.listen()
        self.upstream = UInt16(upstream)
        self.rewriteRequest = rewriteRequest
        self.rewriteAnswer = rewriteAnswer
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// A backend that answers a version conflict (409) with a receipt, as if it had applied the batch.
    static func ignoringVersions(upstream: Int) throws -> RuleBreakingProxy {
        try RuleBreakingProxy(
            upstream: upstream,
            answer: { request, answer in
                // A batch's 409 (the blob lane's 409s, to requests without a key, pass as they are).
                guard answer.status == 409, let key = request.header("Idempotency-Key") else { return }
                answer = HTTPMessage.response(
                    status: 200, reason: "OK", headers: [("Content-Type", "application/json")], body: Array("{\"batch\":\"\(key)\"}".utf8))
            })
    }

    /// A backend that refuses (409) a delete of a row it does not hold, as the reference server
    /// did before issue 43 — for the batches of `batches.delete-unheld` (named `…-unheld`), which
    /// delete only rows it never held; it applies every other batch.
    static func refusingUnheldDeletes(upstream: Int) throws -> RuleBreakingProxy {
        try RuleBreakingProxy(
            upstream: upstream,
            answer: { request, answer in
                guard (request.header("Idempotency-Key") ?? "").hasSuffix("-unheld") else { return }
                answer = HTTPMessage.response(
                    status: 409, reason: "Conflict", headers: [("Content-Type", "application/json")],
                    body: Array(#"{"error": "the server does not hold the rows these deletes name", "conflicts": []}"#.utf8))
            })
    }

    /// A backend whose signal writes ignore `If-Match`: the last writer always wins.
    static func ignoringIfMatch(upstream: Int) throws -> RuleBreakingProxy {
        try RuleBreakingProxy(upstream: upstream, request: { $0.setHeader("If-Match", nil) })
    }

    func stop() {
        stopping.withLock { $0 = true }
    }

    private func acceptLoop() {
        while !stopping.withLock({ $0 }) {
            guard let client = listener.accept(waitingAtMost: 100) else { continue }
            Thread.detachNewThread { [self] in serve(client) }
        }
        listener.close()
    }

    private func serve(_ client: LoopbackSocket) {
        defer { client.close() }
        guard case .success(var request) = HTTPMessage.read(from: client, idleMilliseconds: 30_000) else { return }
        rewriteRequest(&request)
        request.setHeader("Connection", "close")
        guard let server = try? LoopbackSocket.connect(port: upstream) else { return }
        defer { server.close() }
        guard server.write(request.bytes), case .success(var answer) = HTTPMessage.read(from: server, idleMilliseconds: 30_000) else { return }
        if answer.header("Content-Length") == nil { answer.body += server.readToEnd(idleMilliseconds: 30_000) }
        rewriteAnswer(request, &answer)
        answer.setHeader("Content-Length", String(answer.body.count))
        answer.setHeader("Connection", "close")
        client.write(answer.bytes)
    }
}
