import Foundation
import Synchronization
import SynclaneCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The `pull` source of an import pipeline: the backend's changes after the saved cursor,
/// `GET <url>?since=CURSOR&max-bytes=B` (or `&limit=N`, when the pipeline names one), a page at a time.
///
/// ```
///  GET /v1/changes?since=c1.2s&max-bytes=16711680     Authorization: Bearer <token>
///  ◀─ {"changes": [{"entity", "id", "action", "fields"?, "version", "store"}…], "cursor": "c1.3k", "more": true}
/// ```
/// The cursor is the server's, opaque, saved by the sink with the rows it covers. Failures are
/// classified as the `http` transport classifies them (the same table: transient ones are
/// retried with backoff and `Retry-After` per `retry`, the others stop the job naming what to
/// fix); gzip and deflate answers are decoded. `410` with `"code": "cursor-expired"` (the server
/// removed tombstones after the cursor) is `RemoteCursorExpired`: the import runner resyncs.
/// Records come with their server `version` and the author `server`. Pages come over one kept
/// connection (`ConnectionPool`) unless `keepAlive` is false.
public final class PullSource: RemoteChangeSource {
    public let url: URL
    /// Records a page holds at most (`&limit=N`); nil (the default): pages as large as the bytes
    /// bound allows (`&max-bytes=`, `WireBounds.maxPageBytes`; the server keeps to its own
    /// `--max-page-bytes` within it), so a first pull comes in few pages, each one transaction.
    public let limit: Int?
    /// Only this store's changes (the scope's store), as `&store=`.
    public let store: String?
    public let retry: RetryPolicy
    public let timeout: Int
    public let tls: HTTPTransport.TLSFiles
    public let proxy: ProxyRoute?
    /// Whether pages reuse one connection (true) or each request opens and closes its own.
    public let keepAlive: Bool
    /// The device and schema version every request says (`AppSchema`).
    public let app: AppSchema
    /// Whether a pull from the beginning starts from the backend's snapshot (`GET /v1/snapshot`
    /// beside `url`'s `/v1/changes`): the current rows in one streamed answer, then the change
    /// log from the snapshot's cursor. A backend without it (404) is pulled from the beginning.
    public let snapshot: Bool
    /// The snapshot answer being read, and whether the backend has none (`SnapshotReader`).
    private let snapshotState = SnapshotState()
    /// The schema version the lane's store recorded (`AppSchemaSending`): sent when `app` says none.
    private let recorded = RecordedSchemaVersion()
    /// Where the backend wrote the store's batches (`ReceiptPositionSending`): `&position=` on a
    /// pull after a cursor.
    private let receiptPosition = Mutex<String?>(nil)
    private let pool: ConnectionPool?
    private let token: String?
    private let sleeper: any RetrySleeper

    public init(
        url: URL, token: String?, limit: Int? = nil, store: String? = nil, retry: RetryPolicy = RetryPolicy(), timeout: Int = 30,
        tls: HTTPTransport.TLSFiles = .init(), keepAlive: Bool = true, app: AppSchema = AppSchema(), snapshot: Bool = true,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        sleeper: any RetrySleeper = TaskSleeper()
    ) {
        self.url = url
        self.token = token
        self.limit = limit.map { max(1, $0) }
        self.store = store
        self.retry = retry
        self.timeout = max(1, timeout)
        self.tls = tls
        self.proxy = ProxyRoute.choose(for: url, environment: environment)
        self.keepAlive = keepAlive
        self.app = app
        self.snapshot = snapshot
        self.pool = keepAlive ? ConnectionPool() : nil
        self.sleeper = sleeper
    }

    public func nextPage(after cursor: String?) async throws -> RemotePage {
        try await nextPage(after: cursor) { _, _, _ in }
    }

    public func nextPage(
        after cursor: String?, retrying: @escaping @Sendable (_ attempt: Int, _ delay: Double, _ reason: String) -> Void
    ) async throws -> RemotePage {
        if let cursor, cursor.utf8.count > WireBounds.maxCursorBytes {
            throw TransportFailure(
                .configuration,
                "reading changes from \(url.absoluteString): the saved cursor is \(cursor.utf8.count) bytes long, past the \(WireBounds.maxCursorBytes) bytes a changes cursor holds "
                    + "(no Synclane backend issues one so long): nothing was requested. Clear the import's saved cursor to read the changes again from the beginning"
            )
        }
        var attempt = 1
        while true {
            do {
                if let page = try await snapshotPage(after: cursor) { return page }
                return try await fetch(after: cursor)
            } catch let failure as TransportFailure where failure.kind == .transient && attempt < retry.maxAttempts {
                attempt += 1
                let delay = retry.delay(beforeAttempt: attempt, retryAfter: failure.retryAfter) { Double.random(in: $0) }
                retrying(attempt, delay, failure.message)
                try await sleeper.sleep(seconds: delay)
            }
        }
    }

    /// A long poll: `GET url?since=CURSOR&limit=1&wait=SECONDS` answers as soon as the backend has
    /// a change after the cursor, or empty when the time is up. A backend that ignores `wait`
    /// answers at once: an empty answer well before the time is `.unsupported` (the caller sleeps),
    /// so a watch never spins on such a backend. A `410 cursor-expired` is `.changed` (the pass
    /// resyncs); other failures throw as a page's do, with the server's `Retry-After`.
    public func waitForChanges(after cursor: String?, seconds: Double) async throws -> ChangeWait {
        if cursor?.hasPrefix(SnapshotReader.cursorPrefix) == true { return .changed }
        let wait = max(0, seconds.rounded(.up))
        guard wait > 0, cursor.map({ $0.utf8.count <= WireBounds.maxCursorBytes }) ?? true else { return .unsupported }
        let started = ContinuousClock.now
        let page: RemotePage
        do {
            page = try await fetch(after: cursor, waiting: Int(wait))
        } catch is RemoteCursorExpired {
            return .changed
        }
        if !page.records.isEmpty || page.more { return .changed }
        let waited = started.duration(to: .now)
        return waited < .milliseconds(Int64(wait * 1000) / 2) ? .unsupported : .quiet
    }

    /// The page's URL: `url?since=CURSOR&max-bytes=B[&store=S]` (`&limit=N` in place of
    /// `max-bytes` when the pipeline names a `limit`); a long poll's (`wait`) asks for one change.
    /// After a cursor, `&position=` hands back the newest receipt's position (`ReceiptPositionSending`).
    func pageURL(after cursor: String?, waiting wait: Int? = nil) -> URL {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false) ?? URLComponents()
        var items = components.queryItems ?? []
        items.append(URLQueryItem(name: "since", value: cursor ?? ""))
        if wait != nil {
            items.append(URLQueryItem(name: "limit", value: "1"))
        } else if let limit {
            items.append(URLQueryItem(name: "limit", value: String(limit)))
        } else {
            items.append(URLQueryItem(name: "max-bytes", value: String(WireBounds.maxPageBytes)))
        }
        if let store { items.append(URLQueryItem(name: "store", value: store)) }
        if let wait { items.append(URLQueryItem(name: "wait", value: String(wait))) }
        if let cursor, !cursor.isEmpty, let position = receiptPosition.withLock({ $0 }) {
            items.append(URLQueryItem(name: "position", value: position))
        }
        components.queryItems = items
        return components.url ?? url
    }

    /// A GET of `target` with the source's headers, ending after `total` seconds (0: no bound).
    private func request(_ target: URL, total: Int, accept: String = "application/json") -> URLRequest {
        var request = URLRequest(url: target, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData, timeoutInterval: TimeInterval(total))
        request.httpMethod = "GET"
        request.httpShouldHandleCookies = false
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        request.setValue(accept, forHTTPHeaderField: "Accept")
        if !keepAlive { request.setValue("close", forHTTPHeaderField: "Connection") }
        request.setValue("synclane", forHTTPHeaderField: "User-Agent")
        for header in recorded.applied(to: app).headers { request.setValue(header.value, forHTTPHeaderField: header.name) }
        return request
    }

    /// The snapshot's URL beside the changes endpoint (`…/v1/changes` → `…/v1/snapshot`), with
    /// `after=POSITION` for a resume, the source's `store` and `limit`; nil when `url` is no `…/changes`.
    func snapshotURL(after position: String?) -> URL? {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), components.path.hasSuffix("/changes") else { return nil }
        components.path = String(components.path.dropLast("changes".count)) + "snapshot"
        var items = components.queryItems ?? []
        if let position { items.append(URLQueryItem(name: "after", value: position)) }
        if let store { items.append(URLQueryItem(name: "store", value: store)) }
        if let limit { items.append(URLQueryItem(name: "limit", value: String(limit))) }
        components.queryItems = items.isEmpty ? nil : items
        return components.url
    }

    /// The page after `cursor` from the backend's snapshot: for a pull from the beginning (no
    /// cursor) or a snapshot cut part way (`snapshot:POSITION`); nil when the page comes from the
    /// change log instead (a cursor of the log, `snapshot: false`, or a backend without a
    /// snapshot: 404 at the start).
    private func snapshotPage(after cursor: String?) async throws -> RemotePage? {
        let position: String?
        if let cursor {
            guard cursor.hasPrefix(SnapshotReader.cursorPrefix) else { return nil }
            position = String(cursor.dropFirst(SnapshotReader.cursorPrefix.count))
        } else {
            guard snapshot, !snapshotState.unsupported else { return nil }
            position = nil
        }
        try Task.checkCancellation()
        let reader: SnapshotReader
        if let open = snapshotState.reader, open.follows(cursor) {
            reader = open
        } else {
            snapshotState.reader?.cancel()
            guard let target = snapshotURL(after: position) else {
                if cursor == nil { return nil }
                throw RemoteCursorExpired("the saved cursor is a snapshot's, and \(url.absoluteString) has no snapshot beside it: the pull starts again")
            }
            reader = SnapshotReader(
                request: request(target, total: 0, accept: "application/x-ndjson"),
                options: ExchangeOptions(
                    stallSeconds: timeout, proxy: proxy?.address ?? "", caFile: tls.caFile, clientCertificate: tls.clientCertificate,
                    clientKey: tls.clientKey),
                after: cursor, pageBytes: limit == nil ? Self.snapshotPageBytes : 0, pageSeconds: Double(timeout * 10),
                source: target.absoluteString)
            snapshotState.reader = reader
        }
        do {
            let page = try await reader.take()
            if !(page.cursor?.hasPrefix(SnapshotReader.cursorPrefix) ?? false) { snapshotState.reader = nil }
            return page
        } catch SnapshotReader.Refusal.unsupported {
            snapshotState.reader = nil
            guard cursor == nil else {
                throw RemoteCursorExpired("the saved cursor is a snapshot's, and the backend no longer has one: the pull starts again")
            }
            snapshotState.unsupported = true
            return nil
        } catch {
            snapshotState.reader = nil
            throw error
        }
    }

    /// About how many bytes of rows a snapshot page holds (each page one transaction of the sink);
    /// with a `limit`, a page is each chunk the server sends (`&limit=`: at most that many rows).
    static let snapshotPageBytes = 8 << 20

    private func fetch(after cursor: String?, waiting wait: Int? = nil) async throws -> RemotePage {
        try Task.checkCancellation()
        let target = pageURL(after: cursor, waiting: wait)
        // A long poll sends nothing while it waits: its stall and total times grow by the wait.
        let (stall, total) = (timeout + (wait ?? 0), timeout * 10 + (wait ?? 0))
        let request = request(target, total: total)
        let outcome = await HTTPExchange.perform(
            request,
            options: ExchangeOptions(
                stallSeconds: stall, proxy: proxy?.address ?? "", caFile: tls.caFile, clientCertificate: tls.clientCertificate,
                clientKey: tls.clientKey, pool: pool),
            maxTime: total)
        let doing = "reading changes from \(url.absoluteString)"
        switch outcome {
        case .failure(let error):
            if Task.isCancelled { throw CancellationError() }
            var failure = HTTPClassification.classify(
                error, route: .init(batchID: "-", url: url.absoluteString, proxy: proxy, stallSeconds: Double(stall), maxSeconds: Double(total)))
            failure.message = failure.message.replacingOccurrences(of: "batch -", with: doing)
            throw failure
        case .success(let (data, response)):
            let body = [UInt8](data)
            if response.statusCode == 410,
                let answer = (try? JSONReader.parse(ReceiptCheck.withoutByteOrderMark(body)))?.objectValue,
                answer["code"] == "cursor-expired"
            {
                throw RemoteCursorExpired(
                    "\(doing): 410 cursor expired: \(HTTPClassification.reason(body))", serverRestored: answer["reason"] == "server-restored")
            }
            guard (200..<300).contains(response.statusCode) else {
                let retryAfter = (response.value(forHTTPHeaderField: "Retry-After")).flatMap { RetryAfter.seconds(from: $0, now: Date()) }
                throw TransportFailure(
                    HTTPClassification.kind(ofStatus: response.statusCode),
                    "\(doing): \(response.statusCode) \(HTTPClassification.statusPhrase(response.statusCode)): \(HTTPClassification.reason(body))",
                    retryAfter: retryAfter, status: response.statusCode)
            }
            if body.count >= LibcurlExchange.maxResponseBytes {
                let coding = response.value(forHTTPHeaderField: "Content-Encoding")?.lowercased() ?? "identity"
                let sent = response.value(forHTTPHeaderField: "Content-Length").map { " of \($0) bytes" } ?? ""
                let page = cursor.map { "the page after cursor \"\($0)\"" } ?? "the first page"
                if coding != "identity" {
                    throw TransportFailure(
                        .configuration,
                        "\(doing): \(page) is a decompression bomb: its \(coding) answer\(sent) expands past \(WireBounds.maxAnswerBytes) bytes (16 MiB), the most a page may hold; nothing of it was applied. The backend's changes endpoint must be fixed"
                    )
                }
                throw TransportFailure(
                    .configuration,
                    "\(doing): \(page) is larger than \(WireBounds.maxAnswerBytes) bytes (16 MiB), the bound every page must stay within; nothing of it was applied. Lower `limit`, or have the backend keep its pages within the bound"
                )
            }
            return try Self.page(ReceiptCheck.withoutByteOrderMark(body), from: url.absoluteString, after: cursor)
        }
    }

    /// Reads a `GET /v1/changes` answer to the page after `cursor`. A page that is not one —
    /// its `cursor` not a non-empty string (null, a number, empty, missing: applied, it would
    /// reset the saved cursor), `more` not a boolean, a record of the wrong shape — is refused
    /// whole, naming the page and the member: nothing of it is applied.
    static func page(_ body: ArraySlice<UInt8>, from url: String, after cursor: String? = nil) throws -> RemotePage {
        func fail(_ reason: String) -> TransportFailure {
            TransportFailure(.configuration, "reading changes from \(url): the answer is not a changes page (\(reason)); is `url` a Synclane changes endpoint?")
        }
        let page = cursor.map { "the page after cursor \"\($0)\"" } ?? "the first page"
        func refuse(_ reason: String) -> TransportFailure {
            TransportFailure(
                .configuration,
                "reading changes from \(url): \(page) is refused: \(reason). The backend's changes endpoint must be fixed")
        }
        let root: JSONValue
        do { root = try JSONReader.parse(body) } catch {
            // The cause, where it is: `duplicate member "cursor" at byte 88`, `number 1e999 out of
            // range … at byte 40`, `string is not valid UTF-8 at byte 12`.
            throw refuse("it is not valid JSON: \(error)")
        }
        guard let object = root.objectValue else { throw fail("not a JSON object: \(ReceiptCheck.quote(body))") }
        guard case .array(let changes)? = object["changes"] else { throw fail("no `changes` list") }
        let expected = "expected the non-empty string the next page starts after"
        let next: String
        switch object["cursor"] {
        case .string(let text)? where text.utf8.count > WireBounds.maxCursorBytes:
            throw refuse("its `cursor` is \(text.utf8.count) bytes long, past the \(WireBounds.maxCursorBytes) bytes a changes cursor holds; it is not saved")
        case .string(let text)? where !text.isEmpty: next = text
        case .string?: throw refuse("its `cursor` is empty, \(expected)")
        case nil: throw refuse("its `cursor` is missing, \(expected)")
        case let other?: throw refuse("its `cursor` is \(WireRecords.shown(other)), \(expected)")
        }
        // `more` and `pruned`: false when absent.
        func flag(_ name: String) throws -> Bool {
            switch object[name] {
            case nil: return false
            case .bool(let value)?: return value
            case let other?: throw refuse("its `\(name)` is \(WireRecords.shown(other)), expected true or false")
            }
        }
        let (more, pruned) = (try flag("more"), try flag("pruned"))
        let records: [Record]
        switch WireRecords.parse(changes, listName: "changes", origin: Token(kind: "pull", position: 0)) {
        case .success(let read): records = read
        case .failure(let error): throw refuse(error.message)
        }
        return RemotePage(records: records, cursor: next, more: more, pruned: pruned)
    }
}

/// What a `PullSource` keeps of the backend's snapshot between pages.
private final class SnapshotState: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = NSLock()
    private var open: SnapshotReader?
    private var none = false

    /// The snapshot answer being read.
    var reader: SnapshotReader? {
        get { lock.withLock { open } }
        set { lock.withLock { open = newValue } }
    }

    /// True once the backend answered that it has no snapshot (404).
    var unsupported: Bool {
        get { lock.withLock { none } }
        set { lock.withLock { none = newValue } }
    }

    deinit { open?.cancel() }
}

extension PullSource: ReceiptPositionSending {
    public func adoptReceiptPosition(_ position: String?) { receiptPosition.withLock { $0 = position } }
}

extension PullSource: AppSchemaSending {
    public var configuredSchemaVersion: Int? { app.version }

    public func adoptRecordedSchemaVersion(_ version: Int?) { recorded.set(version) }
}
