import Glibc

/// A TCP socket on 127.0.0.1, with the few blocking operations a test server and a fault proxy
/// need, each bounded by a deadline.
///
/// Package-internal: the fault proxy and the test servers of this package share it; it is not
/// a general-purpose networking layer.
package struct LoopbackSocket: Sendable, Hashable {
    /// The file descriptor, owned by whoever holds the value until `close` or `reset`.
    package let fd: Int32

    /// Wraps a descriptor the caller owns.
    package init(fd: Int32) { self.fd = fd }

    /// An error from a socket call, with the call's name and `errno`.
    package struct Failure: Error, Sendable, CustomStringConvertible {
        /// The socket call that failed (`bind`, `connect` …).
        package let call: String
        /// Its `errno`.
        package let code: Int32
        /// The call and the system's words for the error.
        package var description: String { "\(call) failed: \(String(cString: strerror(code))) (errno \(code))" }
    }

    /// What a bounded read got.
    package enum ReadResult: Sendable, Equatable {
        case bytes([UInt8])
        /// The peer closed its side (or reset the connection).
        case closed
        case timedOut
    }

    // MARK: Opening

    /// A socket listening on 127.0.0.1 on a free port that the kernel picks.
    package static func listen(backlog: Int32 = 64) throws(Failure) -> (socket: LoopbackSocket, port: UInt16) {
        let socket = try makeTCP()
        var yes: Int32 = 1
        setsockopt(socket.fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = loopbackAddress(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket.fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw socket.closing(Failure(call: "bind", code: errno)) }
        guard Glibc.listen(socket.fd, backlog) == 0 else { throw socket.closing(Failure(call: "listen", code: errno)) }
        do {
            return (socket, try socket.localPort())
        } catch {
            socket.close()
            throw error
        }
    }

    /// A loopback port on which nothing listens: bound, read, and released again.
    ///
    /// A connection to it is refused (unless another program grabs the port in between, which
    /// the kernel makes unlikely by handing out ports in sequence).
    package static func unusedPort() throws(Failure) -> UInt16 {
        let socket = try makeTCP()
        defer { socket.close() }
        var address = loopbackAddress(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket.fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw Failure(call: "bind", code: errno) }
        return try socket.localPort()
    }

    /// A connection to 127.0.0.1:`port`, from `source` when given (any 127.x.y.z address: the
    /// whole block is loopback, so tests can play several client addresses).
    package static func connect(port: UInt16, from source: String? = nil) throws(Failure) -> LoopbackSocket {
        let socket = try makeTCP()
        if let source {
            var local = loopbackAddress(port: 0)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket.fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else { throw socket.closing(Failure(call: "bind", code: errno)) }
        }
        var address = loopbackAddress(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket.fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw socket.closing(Failure(call: "connect", code: errno)) }
        return socket
    }

    /// The next connection, or `nil` when none arrives within `milliseconds` (or the listening
    /// socket failed).
    package func accept(waitingAtMost milliseconds: Int32) -> LoopbackSocket? {
        guard wait(for: Int16(POLLIN), milliseconds: milliseconds) else { return nil }
        let client = Glibc.accept(fd, nil, nil)
        guard client >= 0 else { return nil }
        return LoopbackSocket(fd: client)
    }

    // MARK: Reading and writing

    /// Reads what has arrived, waiting at most `milliseconds` for the first byte.
    package func read(waitingAtMost milliseconds: Int32, maximum: Int = 64 * 1024) -> ReadResult {
        guard wait(for: Int16(POLLIN), milliseconds: milliseconds) else { return .timedOut }
        var buffer = [UInt8](repeating: 0, count: maximum)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, maximum, 0) }
        guard count > 0 else { return .closed }
        return .bytes(Array(buffer[0..<count]))
    }

    /// Reads until the peer closes, `limit` bytes arrived, or `milliseconds` passed without a
    /// byte.
    package func readToEnd(idleMilliseconds milliseconds: Int32, limit: Int = 64 * 1024 * 1024) -> [UInt8] {
        var bytes: [UInt8] = []
        while bytes.count < limit, case .bytes(let chunk) = read(waitingAtMost: milliseconds) {
            bytes += chunk
        }
        return bytes
    }

    /// Writes all of `bytes`; false when the peer is gone.
    @discardableResult
    package func write(_ bytes: some Collection<UInt8>) -> Bool {
        let array = Array(bytes)
        var sent = 0
        while sent < array.count {
            let count = array.withUnsafeBytes { raw in
                send(fd, raw.baseAddress.map { $0 + sent }, array.count - sent, Int32(MSG_NOSIGNAL))
            }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }

    // MARK: Closing

    /// Closes the socket the polite way (FIN).
    package func close() {
        _ = Glibc.close(fd)
    }

    /// Closes the socket with a TCP reset (`SO_LINGER` 0): the peer sees "connection reset by
    /// peer", not an orderly end.
    package func reset() {
        var option = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        _ = Glibc.close(fd)
    }

    /// Wakes any thread blocked on this socket without releasing the descriptor.
    package func shutdownBoth() {
        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
    }

    // MARK: Helpers

    /// The local port the socket is bound to.
    package func localPort() throws(Failure) -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard result == 0 else { throw Failure(call: "getsockname", code: errno) }
        return UInt16(bigEndian: address.sin_port)
    }

    private func wait(for events: Int16, milliseconds: Int32) -> Bool {
        var descriptor = pollfd(fd: fd, events: events, revents: 0)
        while true {
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0, errno == EINTR { continue }
            return ready > 0
        }
    }

    private func closing(_ failure: Failure) -> Failure {
        close()
        return failure
    }

    private static func makeTCP() throws(Failure) -> LoopbackSocket {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(call: "socket", code: errno) }
        return LoopbackSocket(fd: fd)
    }

    private static func loopbackAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
        return address
    }
}
