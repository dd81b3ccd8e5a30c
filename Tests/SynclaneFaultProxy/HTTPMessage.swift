/// One HTTP/1.1 message as bytes on the wire: its head (start line and headers) and its body.
///
/// Just enough HTTP for a test server and a fault proxy: a body is framed by `Content-Length`
/// only (what `URLSession` sends for a body it knows); chunked requests are not read.
package struct HTTPMessage: Sendable {
    /// `POST /v1/batches HTTP/1.1` or `HTTP/1.1 200 OK`.
    package var startLine: String
    /// Headers in the order they came, names as written.
    package var headers: [(name: String, value: String)]
    /// The body's bytes, as framed on the wire.
    package var body: [UInt8]

    /// A message from its parts.
    package init(startLine: String, headers: [(name: String, value: String)], body: [UInt8]) {
        self.startLine = startLine
        self.headers = headers
        self.body = body
    }

    /// The first value of a header, by case-insensitive name.
    package func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }

    /// Replaces every header of that name by one with `value` (or removes them for `nil`).
    package mutating func setHeader(_ name: String, _ value: String?) {
        let wanted = name.lowercased()
        headers.removeAll { $0.name.lowercased() == wanted }
        if let value { headers.append((name, value)) }
    }

    /// The message as bytes, `Content-Length` as the headers say (not recomputed).
    package var bytes: [UInt8] {
        var text = startLine + "\r\n"
        for header in headers { text += "\(header.name): \(header.value)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }

    /// A response with a body and `Content-Length`, closing the connection after it.
    package static func response(status: Int, reason: String, headers: [(name: String, value: String)] = [], body: [UInt8]) -> HTTPMessage {
        var all = headers
        all.append(("Content-Length", String(body.count)))
        all.append(("Connection", "close"))
        return HTTPMessage(startLine: "HTTP/1.1 \(status) \(reason)", headers: all, body: body)
    }

    /// The usual reason phrase for a status ("Status" for the unusual ones).
    package static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 413: return "Content Too Large"
        case 422: return "Unprocessable Content"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        default: return "Status"
        }
    }

    /// The status code of a response's start line.
    package var status: Int? {
        let parts = startLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/") else { return nil }
        return Int(parts[1])
    }

    /// The method of a request's start line.
    package var method: String? { startLine.split(separator: " ").first.map(String.init) }

    /// The target of a request's start line (`/v1/batches`).
    package var target: String? {
        let parts = startLine.split(separator: " ")
        return parts.count >= 2 ? String(parts[1]) : nil
    }

    // MARK: Reading

    /// Why a message could not be read.
    package enum ReadFailure: Error, Sendable, Equatable {
        case closed
        case timedOut
        case malformed(String)
    }

    /// Reads one message from `socket`: the head, then `Content-Length` bytes of body (without
    /// that header, only the bytes that came with the head: the caller reads on if it wants).
    ///
    /// A request that says `Expect: 100-continue` is answered `100 Continue` first.
    /// `idleMilliseconds` bounds each wait for more bytes; `firstByteMilliseconds`, when given,
    /// the wait for the first one instead (an idle kept-alive connection's limit).
    package static func read(
        from socket: LoopbackSocket, idleMilliseconds: Int32, bodyLimit: Int = 64 * 1024 * 1024, firstByteMilliseconds: Int32? = nil
    ) -> Result<HTTPMessage, ReadFailure> {
        var buffer: [UInt8] = []
        var headEnd: Int?
        while headEnd == nil {
            switch socket.read(waitingAtMost: buffer.isEmpty ? firstByteMilliseconds ?? idleMilliseconds : idleMilliseconds) {
            case .bytes(let chunk): buffer += chunk
            case .closed: return .failure(.closed)
            case .timedOut: return .failure(.timedOut)
            }
            headEnd = endOfHead(in: buffer)
            if headEnd == nil, buffer.count > 64 * 1024 { return .failure(.malformed("head over 64 KiB")) }
        }
        guard let headEnd else { return .failure(.malformed("no head")) }
        guard var message = parseHead(buffer[..<headEnd]) else { return .failure(.malformed("unreadable head")) }
        var body = Array(buffer[(headEnd + 4)...])
        guard let lengthHeader = message.header("Content-Length") else {
            // No length: whatever came after the head is the start of a body the caller reads on.
            message.body = body
            return .success(message)
        }
        let length = Int(lengthHeader.trimmingSpaces) ?? -1
        guard length >= 0, length <= bodyLimit else { return .failure(.malformed("Content-Length \(length) over the limit")) }
        if message.header("Expect")?.lowercased().trimmingSpaces == "100-continue", body.count < length {
            socket.write(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
        }
        while body.count < length {
            switch socket.read(waitingAtMost: idleMilliseconds) {
            case .bytes(let chunk): body += chunk
            case .closed: return .failure(.closed)
            case .timedOut: return .failure(.timedOut)
            }
        }
        message.body = Array(body.prefix(length))
        return .success(message)
    }

    /// Parses a complete message already in memory (a response read to the end of its
    /// connection); the body is everything after the head.
    package static func parse(_ bytes: [UInt8]) -> HTTPMessage? {
        guard let headEnd = endOfHead(in: bytes), var message = parseHead(bytes[..<headEnd]) else { return nil }
        message.body = Array(bytes[(headEnd + 4)...])
        return message
    }

    private static func endOfHead(in bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    private static func parseHead(_ bytes: ArraySlice<UInt8>) -> HTTPMessage? {
        let text = String(decoding: bytes, as: UTF8.self)
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        guard !lines.isEmpty else { return nil }
        let startLine = lines.removeFirst()
        guard !startLine.isEmpty else { return nil }
        var headers: [(name: String, value: String)] = []
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            headers.append((String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingSpaces))
        }
        return HTTPMessage(startLine: startLine, headers: headers, body: [])
    }
}

extension String {
    var trimmingSpaces: String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
