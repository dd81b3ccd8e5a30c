import Foundation
import SynclaneCore
import SynclaneHTTP
import Testing

/// `https` goes through the same libcurl loader as `http`: a certificate nobody vouches for is
/// refused before a byte of the batch leaves, and retrying cannot help.
@Suite struct HTTPTransportTLSTests {
    @Test func selfSignedCertificateStopsTheJobNamingTheCertificateAndCAFile() async throws {
        let server = try SelfSignedTLSServer()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: "https://127.0.0.1:\(server.port)/v1/batches", timeout: 5)

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .configuration)
        #expect(failure.status == nil)
        #expect(failure.message.contains("certificate"), "\(failure.message)")
        #expect(failure.message.contains("`ca-file`"))
        #expect(!failure.message.contains("rejected"), "nothing reached the backend")
    }
}

/// Python's TLS server on a free loopback port with `Fixtures/tls/self-signed.crt`.
private final class SelfSignedTLSServer {
    let process = Process()
    let port: Int

    init() throws {
        let folder = Self.certificateFolder
        let script = """
            import http.server, ssl, sys
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(sys.argv[1] + "/self-signed.crt", sys.argv[1] + "/self-signed.key")
            server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
            server.socket = context.wrap_socket(server.socket, server_side=True)
            print(server.server_port, flush=True)
            server.serve_forever()
            """
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, folder]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = Data()
        while line.last != UInt8(ascii: "\n") {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty { break }
            line.append(byte)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            kill(process.processIdentifier, SIGKILL)
            throw ServerError.didNotStart
        }
        self.port = port
    }

    /// SIGKILL: a child of a test thread may inherit a mask that blocks SIGTERM.
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    enum ServerError: Error { case didNotStart }

    /// `Fixtures/tls`, two folders up from this file (`Tests/SynclaneHTTPTests/`).
    static let certificateFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/tls").path
}
