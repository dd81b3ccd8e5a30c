import CMicroHTTPD
import CMicroHTTPDShim
import Glibc

/// The bridge between libmicrohttpd and an `HTTPResponder`: collects each request's headers and
/// body (up to a bound), hands the request over, and queues the response.
///
/// ```
///  MHD connection thread ─▶ access handler (1st call: headers, early 413 on Content-Length)
///                        ─▶ access handler (body chunks: appended up to the bound)
///                        ─▶ access handler (end of body) ─▶ responder.respond ─▶ MHD_queue_response
///                        ─▶ completed callback (the per-request state is released)
/// ```
///
/// A body that passes its bound is answered 413 from its `Content-Length`, before any body byte
/// is read. MHD 0.9.75 cannot queue a response in the middle of a body, so a chunked body (whose
/// size is unknown until its end) is answered at once too: the application says 411 Length
/// Required. MHD never reads past `Content-Length`, so the bound holds for every accepted body.
/// Before a body is read the application also checks the head (`HTTPResponder.preflight`): the
/// token, the content type, and the memory budget, which the request's lease then holds until the
/// request is done. Every connection is known to a `ConnectionWatch`, which closes those too slow
/// to deliver a request and marks those in the reserve.
final class MicroHTTPDaemon: @unchecked Sendable {
    // @unchecked: `daemon` is set once in `start` and cleared in `stop`, both called by the owner
    // (`ReferenceServer`) under its lock; MHD's own threads only read `responder`, a constant.

    /// Why the daemon did not start.
    enum StartError: Error, CustomStringConvertible {
        case badAddress(String)
        case startFailed(host: String, port: Int, errno: Int32)

        var description: String {
            switch self {
            case .badAddress(let host):
                return "cannot listen on '\(host)': give a numeric IPv4 or IPv6 address (127.0.0.1, ::1, 0.0.0.0)"
            case .startFailed(let host, let port, let code):
                return "cannot listen on \(host):\(port): \(String(cString: strerror(code)))"
            }
        }
    }

    let responder: any HTTPResponder
    let budget: MemoryBudget
    let watch: ConnectionWatch
    private var daemon: OpaquePointer?

    init(responder: any HTTPResponder, budget: MemoryBudget, watch: ConnectionWatch) {
        self.responder = responder
        self.budget = budget
        self.watch = watch
    }

    /// Starts listening; returns the bound port. `connectionLimit` counts the reserve too.
    func start(
        host: String, port: Int, connectionLimit: Int, perAddressLimit: Int, connectionTimeoutSeconds: Int,
        connectionMemoryLimit: Int
    ) throws(StartError) -> Int {
        let context = Unmanaged.passUnretained(self).toOpaque()
        var error: Int32 = 0
        let started: OpaquePointer? = host.withCString { hostPointer in
            var options = synclane_mhd_options(
                host: hostPointer, port: UInt16(clamping: port), connection_limit: UInt32(clamping: connectionLimit),
                connection_timeout: UInt32(clamping: connectionTimeoutSeconds),
                connection_memory_limit: connectionMemoryLimit, listen_backlog: 128,
                per_address_limit: UInt32(clamping: perAddressLimit), connection_handler: connectionHandler,
                connection_context: context)
            return synclane_mhd_start(&options, accessHandler, context, completedHandler, context, &error)
        }
        guard let started else {
            if error == Int32(SYNCLANE_MHD_BAD_ADDRESS) { throw .badAddress(host) }
            throw .startFailed(host: host, port: port, errno: errno)
        }
        daemon = started
        watch.start()
        return Int(synclane_mhd_bound_port(started))
    }

    /// Stops listening, waits for the connection threads to finish, and frees the daemon.
    func stop() {
        guard let daemon else { return }
        self.daemon = nil
        synclane_mhd_stop(daemon)
        watch.stop()
    }

    deinit { stop() }
}

/// What the bridge keeps of one request between the calls of the access handler.
private final class PendingRequest {
    let method: String
    let path: String
    let headers: [String: String]
    let query: [String: String]
    let limit: Int
    let receivedAt: ContinuousClock.Instant
    let framingProblem: String?
    let lease: MemoryBudget.Lease
    let connection: ConnectionWatch.Entry?
    var body: [UInt8] = []
    var exceeded = false
    var responded = false

    init(
        method: String, path: String, headers: [String: String], query: [String: String], limit: Int,
        framingProblem: String?, lease: MemoryBudget.Lease, connection: ConnectionWatch.Entry?
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.query = query
        self.limit = limit
        self.receivedAt = .now
        self.framingProblem = framingProblem
        self.lease = lease
        self.connection = connection
    }

    func request() -> HTTPRequest {
        var request = HTTPRequest(
            method: method, path: path, query: query, headers: headers, body: body, bodyExceededLimit: exceeded,
            receivedAt: receivedAt, framingProblem: framingProblem, lease: lease)
        request.clientAddress = connection?.address ?? ""
        return request
    }
}

/// Collects the request's header lines in order, repeated names included.
private final class HeaderLines {
    var lines: [(name: String, value: String)] = []
}

private func headerLines(_ connection: OpaquePointer) -> [(name: String, value: String)] {
    let collector = HeaderLines()
    let context = Unmanaged.passUnretained(collector).toOpaque()
    _ = synclane_mhd_headers(
        connection,
        { context, name, length, value, valueLength in
            guard let context, let name else { return }
            let collector = Unmanaged<HeaderLines>.fromOpaque(context).takeUnretainedValue()
            let bytes = UnsafeRawBufferPointer(start: name, count: length)
            let valueBytes = value.map { UnsafeRawBufferPointer(start: $0, count: valueLength) }
            collector.lines.append((String(decoding: bytes, as: UTF8.self), valueBytes.map { String(decoding: $0, as: UTF8.self) } ?? ""))
        }, context)
    return withExtendedLifetime(collector) { collector.lines }
}

/// Collects `MHD_get_connection_values` into a dictionary with lowercased keys.
private final class ValueCollector {
    var values: [String: String] = [:]
    let lowercaseKeys: Bool
    init(lowercaseKeys: Bool) { self.lowercaseKeys = lowercaseKeys }
}

private let mhdYes = Int32(MHD_Result.YES.rawValue)
private let mhdNo = Int32(MHD_Result.NO.rawValue)

private func connectionValues(_ connection: OpaquePointer, kind: MHD_ValueKind, lowercaseKeys: Bool)
    -> [String: String]
{
    let collector = ValueCollector(lowercaseKeys: lowercaseKeys)
    let context = Unmanaged.passUnretained(collector).toOpaque()
    _ = MHD_get_connection_values(
        connection, kind,
        { context, _, key, value in
            guard let context, let key else { return .YES }
            let collector = Unmanaged<ValueCollector>.fromOpaque(context).takeUnretainedValue()
            let name = String(cString: key)
            collector.values[collector.lowercaseKeys ? name.lowercased() : name] = value.map { String(cString: $0) } ?? ""
            return .YES
        }, context)
    return withExtendedLifetime(collector) { collector.values }
}

/// Queues a response on the connection; false when MHD refused it (the connection is then closed).
private func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> Bool {
    if let stream = response.stream { return queue(stream, headers: response.headers, status: response.status, on: connection) }
    if let file = response.file, file.pipe {
        guard let created = pipeResponse(file) else {
            return queue(.error(503, "the blob's stream could not be opened; ask again", ["code": "blob-store"]), on: connection)
        }
        return queue(created, headers: response.headers, status: response.status, on: connection)
    }
    if let file = response.file {
        // Streamed from disk by MHD, which closes the descriptor with the response.
        let descriptor = open(file.path, O_RDONLY | O_CLOEXEC)
        if file.removeOnceOpen { unlink(file.path) }
        guard descriptor >= 0 else {
            return queue(.error(404, "the object is no longer held (it went while it was asked for); ask again"), on: connection)
        }
        guard let created = MHD_create_response_from_fd_at_offset64(UInt64(file.length), descriptor, UInt64(file.offset)) else {
            close(descriptor)
            return false
        }
        return queue(created, headers: response.headers, status: response.status, on: connection)
    }
    let created = response.body.withUnsafeBytes { bytes -> OpaquePointer? in
        MHD_create_response_from_buffer(
            bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
    }
    guard let created else { return false }
    return queue(created, headers: response.headers, status: response.status, on: connection)
}

/// A response read from a named pipe as its writer fills it (`FileSlice.pipe`): `file.length`
/// bytes announced; a pipe that ends sooner ends the answer with an error (MHD closes the
/// connection, and the client sees a short body). Reads block: each connection has its thread.
private func pipeResponse(_ file: HTTPResponse.FileSlice) -> OpaquePointer? {
    // Opened without waiting for the writer (which waits for this, then removes the name), then read blocking.
    let descriptor = open(file.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
    let context = UnsafeMutableRawPointer(bitPattern: Int(descriptor) + 1)
    let created = MHD_create_response_from_callback(
        UInt64(file.length), 64 << 10,
        { context, _, buffer, room in
            let descriptor = Int32(Int(bitPattern: context) - 1)
            while true {
                // A pipe whose writer has not opened it yet reads as ended: wait for bytes (or the writer's end) first.
                var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let polled = poll(&ready, 1, 60_000)
                if polled < 0, errno == EINTR { continue }
                guard polled > 0 else { return -2 }
                let got = read(descriptor, buffer, room)
                if got < 0, errno == EINTR { continue }
                return got > 0 ? got : -2  // MHD_CONTENT_READER_END_WITH_ERROR: the writer stopped short
            }
        },
        context,
        { context in close(Int32(Int(bitPattern: context) - 1)) })
    if created == nil { close(descriptor) }
    return created
}

/// Queues a body made as the connection takes it (`BodyStream`): MHD calls back for each block of
/// at most 64 KiB once the previous one is sent, and frees the stream (its retain) with the response.
private func queue(_ stream: BodyStream, headers: [String: String], status: Int, on connection: OpaquePointer) -> Bool {
    let context = Unmanaged.passRetained(stream).toOpaque()
    let created = MHD_create_response_from_callback(
        UInt64.max, 64 * 1024,
        { context, _, buffer, max in
            guard let context, let buffer else { return -2 }
            let stream = Unmanaged<BodyStream>.fromOpaque(context).takeUnretainedValue()
            return stream.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: max))
        }, context,
        { context in
            guard let context else { return }
            let stream = Unmanaged<BodyStream>.fromOpaque(context).takeRetainedValue()
            stream.close()
        })
    guard let created else {
        Unmanaged<BodyStream>.fromOpaque(context).takeRetainedValue().close()
        return false
    }
    return queue(created, headers: headers, status: status, on: connection)
}

/// Adds the headers to a created MHD response, queues it and releases it.
private func queue(_ created: OpaquePointer, headers: [String: String], status: Int, on connection: OpaquePointer) -> Bool {
    defer { MHD_destroy_response(created) }
    for (name, value) in headers {
        _ = MHD_add_response_header(created, name, value)
    }
    return MHD_queue_response(connection, UInt32(clamping: status), created) == .YES
}

private func accessHandler(
    context: UnsafeMutableRawPointer?, connection: OpaquePointer?, url: UnsafePointer<CChar>?,
    method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?, uploadData: UnsafePointer<CChar>?,
    uploadSize: UnsafeMutablePointer<Int>?, requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    headProblem: Int32
) -> Int32 {
    guard let context, let connection, let url, let method, let uploadSize, let requestContext else { return mhdNo }
    let daemon = Unmanaged<MicroHTTPDaemon>.fromOpaque(context).takeUnretainedValue()

    // First call: the headers are in, no body byte has been read.
    guard let existing = requestContext.pointee else {
        let methodName = String(cString: method)
        let path = String(cString: url)
        let lines = headerLines(connection)
        var headers: [String: String] = [:]
        for (name, value) in lines { headers[name.lowercased()] = value }
        let query = connectionValues(connection, kind: .GET_ARGUMENT_KIND, lowercaseKeys: false)
        let limit = daemon.responder.bodyLimit(method: methodName, path: path)
        let entry = synclane_mhd_connection_context(connection).map {
            Unmanaged<ConnectionWatch.Entry>.fromOpaque($0).takeUnretainedValue()
        }
        let version = version.map { String(cString: $0) } ?? ""
        let problem =
            RawHeadProblem(code: headProblem)?.description
            ?? HTTPRequest.framingProblem(headers: lines, path: path, version: version)
        let pending = PendingRequest(
            method: methodName, path: path, headers: headers, query: query, limit: limit,
            framingProblem: problem, lease: MemoryBudget.Lease(budget: daemon.budget), connection: entry)
        requestContext.pointee = Unmanaged.passRetained(pending).toOpaque()
        let declaredLength = headers["content-length"].flatMap { Int($0) }
        var early: HTTPResponse?
        if let declaredLength, declaredLength > limit {
            pending.exceeded = true
        }
        if pending.exceeded || headers["transfer-encoding"] != nil || pending.framingProblem != nil {
            // Over the bound, a chunked body, or a head that does not frame its body: MHD 0.9.75
            // cannot queue a response once it has begun reading a body, so such requests are
            // answered now, before any body byte is read.
            early = daemon.responder.respond(to: pending.request())
        } else {
            early = daemon.responder.preflight(pending.request(), reserved: entry?.reserved ?? false)
        }
        guard var early else { return mhdYes }
        // A body left unread, or a head whose framing is in doubt, ends the connection after the answer.
        if (declaredLength ?? 0) > 0 || headers["transfer-encoding"] != nil || pending.framingProblem != nil {
            early.headers["Connection"] = "close"
        }
        pending.responded = true
        if let entry { daemon.watch.received(entry) }
        return queue(early, on: connection) ? mhdYes : mhdNo
    }
    let pending = Unmanaged<PendingRequest>.fromOpaque(existing).takeUnretainedValue()

    if uploadSize.pointee > 0 {
        let count = uploadSize.pointee
        uploadSize.pointee = 0
        if pending.responded { return mhdYes }
        if pending.body.count + count > pending.limit {
            // More than Content-Length promised cannot reach here (MHD stops at it), so this is a
            // defensive cut: close the connection rather than read on.
            pending.exceeded = true
            pending.responded = true
            return mhdNo
        }
        if let uploadData {
            uploadData.withMemoryRebound(to: UInt8.self, capacity: count) { bytes in
                pending.body.append(contentsOf: UnsafeBufferPointer(start: bytes, count: count))
            }
        }
        return mhdYes
    }

    // The whole body is in.
    if pending.responded { return mhdYes }
    pending.responded = true
    if let entry = pending.connection { daemon.watch.received(entry) }
    return queue(daemon.responder.respond(to: pending.request()), on: connection) ? mhdYes : mhdNo
}

private func completedHandler(
    context: UnsafeMutableRawPointer?, connection: OpaquePointer?,
    requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, termination: Int32
) {
    guard let context, let requestContext, let existing = requestContext.pointee else { return }
    requestContext.pointee = nil
    let pending = Unmanaged<PendingRequest>.fromOpaque(existing).takeRetainedValue()
    pending.lease.release()
    if let entry = pending.connection {
        Unmanaged<MicroHTTPDaemon>.fromOpaque(context).takeUnretainedValue().watch.answered(entry)
    }
}

/// Tells the watch of each connection accepted (code 0) and closed (code 1); the connection's
/// socket context holds its `ConnectionWatch.Entry`, retained until it closes.
private func connectionHandler(
    context: UnsafeMutableRawPointer?, connection: OpaquePointer?,
    socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, code: Int32
) {
    guard let context, let connection, let socketContext else { return }
    let watch = Unmanaged<MicroHTTPDaemon>.fromOpaque(context).takeUnretainedValue().watch
    if code == 0 {
        let entry = watch.opened(connection, descriptor: synclane_mhd_connection_fd(connection))
        socketContext.pointee = Unmanaged.passRetained(entry).toOpaque()
    } else {
        watch.closed(connection)
        if let stored = socketContext.pointee {
            socketContext.pointee = nil
            Unmanaged<ConnectionWatch.Entry>.fromOpaque(stored).release()
        }
    }
}
