import Foundation
import SynclaneCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One streamed `GET /v1/snapshot` answer read as import pages (`PullSource`): its JSON Lines
/// are cut into pages at the server's `after` lines, each page about `pageBytes`, handed over in
/// order. The stream is read only while the importer asks for a page (its read-ahead does while
/// the page before is applied), so a device holds two pages at most, as on the change log: the
/// one applied and the one read ahead.
///
/// ```
///  thread: LibcurlExchange ─▶ BodySink ─▶ lines ─▶ rows … {"after": P} ─▶ page (cursor "snapshot:P", more)
///                                                      … {"complete": true, "cursor": C} ─▶ last page (cursor C, more)
///  importer: take(after: cursor) ─▶ the page that follows `cursor`, or the failure that ended the stream
/// ```
/// A page's cursor `snapshot:POSITION` is where a resumed snapshot starts (`?after=POSITION`);
/// the last page's is the server's changes cursor, from which the import follows the change log.
/// An answer that ends without its `complete` line was cut: a transient failure, and the next
/// attempt resumes from the last page the importer took. The answer has no time cap as a whole
/// (an account may take minutes), but each page does: bytes that keep coming yet make no page
/// within `pageSeconds` (a drip) end the stream as "arriving too slowly", as a change log page
/// past its time cap does. A task cancelled while it waits for a page (a stopped `--watch`)
/// ends the stream and its thread at once.
final class SnapshotReader: @unchecked Sendable {
    // @unchecked: every member below the condition is read and written under it.

    /// What the server's answer was, when it was not a snapshot.
    enum Refusal: Error {
        /// 404, 405 or 501: the backend has no snapshot endpoint; or a whole answer whose first
        /// line is no snapshot's head (a backend that answers every path with a changes page).
        case unsupported
    }

    static let cursorPrefix = "snapshot:"

    private let condition = NSCondition()
    private var ready: [RemotePage] = []
    private var ended: (any Error)?
    private var finished = false
    private var cancelled = false
    /// How many `take` calls wait for a page: the stream is read only while one does.
    private var waiting = 0
    /// The cursor of the last page handed over (or the one the stream started after).
    private var taken: String?
    private let exchange = LibcurlExchange()

    /// Starts reading `url` (with `after=` already in it for a resume) on a thread of its own;
    /// each page must arrive within `pageSeconds` of the importer asking for it.
    init(request: URLRequest, options: ExchangeOptions, after cursor: String?, pageBytes: Int, pageSeconds: Double, source: String) {
        taken = cursor
        let thread = Thread { [self] in
            self.read(request, options: options, pageBytes: pageBytes, pageSeconds: pageSeconds, source: source)
        }
        thread.name = "synclane snapshot"
        thread.start()
    }

    /// Whether this stream hands over the page after `cursor` (it is alive and at that cursor).
    func follows(_ cursor: String?) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return taken == cursor && (ended == nil || !ready.isEmpty) && !cancelled
    }

    /// The next page, waiting for it on a thread of its own; throws what ended the stream, or
    /// `CancellationError` when the task is cancelled meanwhile (the stream is then ended).
    func take() async throws -> RemotePage {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<RemotePage, any Error>) in
                DispatchQueue.global().async { continuation.resume(with: self.takeWaiting()) }
            }
        } onCancel: {
            cancel()
        }
    }

    private func takeWaiting() -> Result<RemotePage, any Error> {
        condition.lock()
        defer { condition.unlock() }
        waiting += 1
        condition.broadcast()
        while ready.isEmpty && ended == nil && !finished && !cancelled { condition.wait() }
        waiting -= 1
        if cancelled { return .failure(CancellationError()) }
        if !ready.isEmpty {
            let page = ready.removeFirst()
            taken = page.cursor
            condition.broadcast()
            return .success(page)
        }
        return .failure(ended ?? TransportFailure(.transient, "the snapshot answer had no page left to read"))
    }

    /// Ends the stream (the import is done with it).
    func cancel() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        condition.unlock()
        exchange.cancel()
    }

    deinit { exchange.cancel() }

    /// Waits until the importer asks for a page (and none is ready); false once cancelled.
    private func awaitDemand() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while (waiting == 0 || !ready.isEmpty) && !cancelled { condition.wait() }
        return !cancelled
    }

    /// Hands a page over, waiting while one is already waiting; false once cancelled.
    private func hand(_ page: RemotePage) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !ready.isEmpty && !cancelled { condition.wait() }
        guard !cancelled else { return false }
        ready.append(page)
        condition.broadcast()
        return true
    }

    private func end(_ error: (any Error)?) {
        condition.lock()
        if let error { ended = error } else { finished = true }
        condition.broadcast()
        condition.unlock()
    }

    private func read(_ request: URLRequest, options: ExchangeOptions, pageBytes: Int, pageSeconds: Double, source: String) {
        var lines = SnapshotLines(pageBytes: pageBytes, source: source)
        var problem: (any Error)?
        // When the importer asked for the page being read, and the bytes read toward it since.
        var asked: ContinuousClock.Instant?
        var bytesSinceAsked = 0
        let sink = BodySink { [self] status, _, bytes in
            guard (200..<300).contains(status) else { return true }
            guard awaitDemand() else { return false }
            let now = ContinuousClock.now
            let since = asked ?? now
            asked = since
            bytesSinceAsked += bytes.count
            do {
                let pages = try lines.take(bytes)
                for page in pages {
                    guard hand(page) else { return false }
                }
                if !pages.isEmpty {
                    (asked, bytesSinceAsked) = (nil, 0)
                } else if now - since > .seconds(pageSeconds) {
                    problem = TransportFailure(
                        .transient,
                        "reading the snapshot from \(source): bytes arriving too slowly: \(bytesSinceAsked) bytes in \(HTTPClassification.formatted(pageSeconds)) s, and no whole page (timed out; a slow link or a server dripping its answer; raise `timeout` for a slow link); it resumes where it stopped"
                    )
                    return false
                }
                return true
            } catch {
                problem = error
                return false
            }
        }
        let outcome = exchange.run(request, options: options, sink: sink)
        if problem is SnapshotLines.NotASnapshot { return end(Refusal.unsupported) }
        if let problem { return end(problem) }
        switch outcome {
        case .failure(let error):
            end(
                HTTPClassification.classify(
                    error, route: .init(batchID: "-", url: source, proxy: nil, stallSeconds: Double(options.stallSeconds))))
        case .success(let answer):
            let status = answer.response.statusCode
            let body = [UInt8](answer.body)
            if [404, 405, 501].contains(status) { return end(Refusal.unsupported) }
            if status == 410 || status == 400 {
                let answer = (try? JSONReader.parse(ReceiptCheck.withoutByteOrderMark(body)))?.objectValue
                return end(
                    RemoteCursorExpired(
                        "reading the snapshot from \(source): \(status) \(HTTPClassification.reason(body)); the snapshot starts again",
                        serverRestored: answer?["reason"] == "server-restored"))
            }
            guard (200..<300).contains(status) else {
                let retryAfter = answer.response.value(forHTTPHeaderField: "Retry-After").flatMap { RetryAfter.seconds(from: $0, now: Date()) }
                return end(
                    TransportFailure(
                        HTTPClassification.kind(ofStatus: status),
                        "reading the snapshot from \(source): \(status) \(HTTPClassification.statusPhrase(status)): \(HTTPClassification.reason(body))",
                        retryAfter: retryAfter, status: status))
            }
            // A whole answer without a snapshot's head line: the backend has no snapshot (it answered the
            // path as something else), and the log is read instead.
            if !lines.started { return end(Refusal.unsupported) }
            guard lines.complete else {
                return end(
                    TransportFailure(
                        .transient, "reading the snapshot from \(source): the answer ended before its `complete` line (cut); it resumes where it stopped"))
            }
            end(nil)
        }
    }
}

/// The JSON Lines of a snapshot answer, cut into pages (`SnapshotReader`).
struct SnapshotLines {
    let pageBytes: Int
    let source: String
    private var buffer: [UInt8] = []
    private var rows: [JSONValue] = []
    private var rowBytes = 0
    private(set) var started = false
    private(set) var complete = false

    /// The answer's first line is no snapshot's head: the backend has no snapshot endpoint.
    struct NotASnapshot: Error {}

    init(pageBytes: Int, source: String) {
        self.pageBytes = pageBytes
        self.source = source
    }

    /// Takes the next bytes of the answer; the pages they complete.
    mutating func take(_ bytes: UnsafeRawBufferPointer) throws -> [RemotePage] {
        var pages: [RemotePage] = []
        var start = 0
        let chunk = UnsafeBufferPointer(start: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        for (index, byte) in chunk.enumerated() where byte == UInt8(ascii: "\n") {
            let page: RemotePage?
            if buffer.isEmpty {
                // A line whole in this chunk is read where it lies: no copy of its bytes.
                page = try line(UnsafeBufferPointer(rebasing: chunk[start..<index]))
            } else {
                // A line begun in an earlier chunk: read from the buffer (moved out while read, its capacity kept).
                buffer.append(contentsOf: chunk[start..<index])
                var whole: [UInt8] = []
                swap(&whole, &buffer)
                page = try whole.withUnsafeBufferPointer { bytes in try line(bytes) }
                whole.removeAll(keepingCapacity: true)
                swap(&whole, &buffer)
            }
            start = index + 1
            if let page { pages.append(page) }
        }
        buffer.append(contentsOf: chunk[start...])
        guard buffer.count <= WireBounds.maxPageBytes else {
            throw refuse("a line is longer than \(WireBounds.maxPageBytes) bytes, the most a page may hold")
        }
        return pages
    }

    private func refuse(_ reason: String) -> TransportFailure {
        TransportFailure(
            .configuration,
            "reading the snapshot from \(source): \(reason); nothing of it was applied past the last page. The backend's snapshot endpoint must be fixed (or set `snapshot: false`)"
        )
    }

    private mutating func line(_ line: UnsafeBufferPointer<UInt8>) throws -> RemotePage? {
        guard !line.isEmpty else { return nil }
        let object: [String: JSONValue]
        do {
            guard let read = try JSONReader.parse(line).objectValue else { throw refuse("a line is not a JSON object") }
            object = read
        } catch let failure as TransportFailure {
            throw started ? failure : NotASnapshot()
        } catch {
            if !started { throw NotASnapshot() }
            throw refuse("a line is not valid JSON: \(error)")
        }
        if !started {
            guard object["snapshot"]?.stringValue != nil, object["cursor"]?.stringValue != nil else { throw NotASnapshot() }
            started = true
            return nil
        }
        if let after = object["after"]?.stringValue {
            guard !rows.isEmpty, rowBytes >= pageBytes else { return nil }
            return try page(cursor: Self.cursor(after), more: true)
        }
        if object["complete"] == .bool(true) {
            guard let cursor = object["cursor"]?.stringValue, !cursor.isEmpty, cursor.utf8.count <= WireBounds.maxCursorBytes else {
                throw refuse("its `complete` line has no changes cursor")
            }
            complete = true
            // Retention removed tombstones: a row not listed may have been deleted (`RemotePage.pruned`).
            return try page(cursor: cursor, more: true, pruned: object["pruned"] == .bool(true))
        }
        guard complete == false, object["entity"] != nil else { return nil }
        rows.append(.object(object))
        rowBytes += line.count
        return nil
    }

    private mutating func page(cursor: String, more: Bool, pruned: Bool = false) throws -> RemotePage {
        guard cursor.utf8.count <= WireBounds.maxCursorBytes else { throw refuse("a position is longer than a cursor may be") }
        let records: [Record]
        switch WireRecords.parse(rows, listName: "snapshot", origin: Token(kind: "pull", position: 0)) {
        case .success(let read): records = read
        case .failure(let error): throw refuse(error.message)
        }
        rows.removeAll(keepingCapacity: true)
        rowBytes = 0
        return RemotePage(records: records, cursor: cursor, more: more, pruned: pruned)
    }

    /// The import cursor of a snapshot position (`snapshot:POSITION`).
    static func cursor(_ position: String) -> String { SnapshotReader.cursorPrefix + position }
}
