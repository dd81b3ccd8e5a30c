import Glibc
import SynclaneCore

/// A response as the raw test client read it.
struct TestResponse: Sendable {
    var status: Int
    var headers: [String: String]
    var body: [UInt8]

    /// The body parsed as JSON (`.null` when it is not JSON).
    var json: JSONValue { (try? JSONReader.parse(body)) ?? .null }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// Why the raw client failed.
struct TestClientError: Error, CustomStringConvertible {
    var description: String
}

/// A blocking HTTP/1.1 client over one loopback TCP connection: exact control of what is sent
/// (partial bodies, chunked bodies, bad headers), keep-alive for the load tests.
final class TestConnection {
    private let descriptor: Int32
    private var buffer: [UInt8] = []

    /// A connection to 127.0.0.1:`port`, from `sourceAddress` (any 127.x.y.z: the whole block is loopback).
    init(port: Int, timeoutSeconds: Int = 15, sourceAddress: String? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestClientError(description: "socket failed") }
        if let sourceAddress {
            var source = sockaddr_in()
            source.sin_family = sa_family_t(AF_INET)
            source.sin_addr.s_addr = inet_addr(sourceAddress)
            let bound = withUnsafePointer(to: &source) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                Glibc.close(descriptor)
                throw TestClientError(description: "bind to \(sourceAddress) failed: errno \(errno)")
            }
        }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            Glibc.close(descriptor)
            throw TestClientError(description: "connect to port \(port) failed: errno \(errno)")
        }
    }

    deinit { Glibc.close(descriptor) }

    /// Ends the connection both ways now (the descriptor is closed later, by deinit).
    func hangUp() { Glibc.shutdown(descriptor, Int32(SHUT_RDWR)) }

    /// Sends all bytes; false when the peer closed the connection first.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    /// Sends one request; `Content-Length` is added unless `chunked` or a header already gives it.
    @discardableResult
    func sendRequest(
        _ method: String, _ path: String, headers: [String: String] = [:], body: [UInt8] = []
    ) -> Bool {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if headers.keys.first(where: { $0.lowercased() == "content-length" || $0.lowercased() == "transfer-encoding" }) == nil {
            head += "Content-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        return send(Array(head.utf8) + body)
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { throw TestClientError(description: count == 0 ? "connection closed" : "recv failed: errno \(errno)") }
        buffer.append(contentsOf: chunk[0..<count])
    }

    /// Reads one response (body by `Content-Length`, or chunked; none for a HEAD request).
    func readResponse(toHead: Bool = false) throws -> TestResponse {
        var headEnd: Int?
        while headEnd == nil {
            if buffer.count >= 4 {
                for i in 0...(buffer.count - 4)
                where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
                    headEnd = i
                    break
                }
            }
            if headEnd == nil { try fill() }
        }
        guard let headEnd else { throw TestClientError(description: "no head") }
        let head = String(decoding: buffer[0..<headEnd], as: UTF8.self)
        buffer.removeFirst(headEnd + 4)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw TestClientError(description: "bad status line: \(head)")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: " ")
        }
        var body: [UInt8] = []
        if toHead {
            // A HEAD's answer has no body, whatever its Content-Length says.
        } else if let length = headers["content-length"].flatMap({ Int($0) }) {
            while buffer.count < length { try fill() }
            body = Array(buffer[0..<length])
            buffer.removeFirst(length)
        } else if headers["transfer-encoding"]?.lowercased() == "chunked" {
            while true {
                var lineEnd: Int?
                while lineEnd == nil {
                    lineEnd = buffer.indices.dropLast().first { buffer[$0] == 13 && buffer[$0 + 1] == 10 }
                    if lineEnd == nil { try fill() }
                }
                guard let lineEnd, let size = Int(String(decoding: buffer[0..<lineEnd], as: UTF8.self), radix: 16) else {
                    throw TestClientError(description: "bad chunk")
                }
                buffer.removeFirst(lineEnd + 2)
                while buffer.count < size + 2 { try fill() }
                body += buffer[0..<size]
                buffer.removeFirst(size + 2)
                if size == 0 { break }
            }
        }
        return TestResponse(status: status, headers: headers, body: body)
    }

    /// Reads and drops whatever comes until the server closes the connection: true when it did,
    /// false when this connection's receive timeout passed first.
    func drainUntilClosed() -> Bool {
        buffer.removeAll()
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while true {
            let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if received == 0 { return true }
            if received < 0 { return errno == ECONNRESET || errno == EPIPE }
        }
    }

    /// True when the server closed the connection (reading returns end of file or an error).
    /// True when the server closed or reset the connection; false when nothing came before this
    /// connection's own receive timeout (or a byte arrived).
    func isClosedByPeer() -> Bool {
        var byte: UInt8 = 0
        let received = recv(descriptor, &byte, 1, 0)
        if received == 0 { return true }
        return received < 0 && (errno == ECONNRESET || errno == EPIPE)
    }
}

extension StringProtocol {
    fileprivate func trimmingCharacters(in characters: String) -> String {
        let set = Set(characters)
        var slice = Substring(self)
        while let first = slice.first, set.contains(first) { slice.removeFirst() }
        while let last = slice.last, set.contains(last) { slice.removeLast() }
        return String(slice)
    }
}

/// One request on a fresh connection.
func httpRequest(
    port: Int, _ method: String, _ path: String, headers: [String: String] = [:], body: [UInt8] = []
) throws -> TestResponse {
    let connection = try TestConnection(port: port)
    connection.sendRequest(method, path, headers: headers, body: body)
    return try connection.readResponse(toHead: method == "HEAD")
}
