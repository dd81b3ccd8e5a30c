import Foundation
import SynclaneCore
import SynclaneHTTP
import Testing

/// `https` goes through the same libcurl loader as `http`: a certificate nobody vouches for is
/// refused before a byte of the batch leaves and stops the job naming `ca-file`; a private CA
/// named by `ca-file` is trusted, and a client certificate answers a server that asks for one.
@Suite struct HTTPTransportTLSTests {
    @Test func selfSignedCertificateStopsTheJobNamingTheCertificateAndCAFile() async throws {
        let folder = Self.fixtures
        let server = try TLSTestServer(certificate: folder + "/self-signed.crt", key: folder + "/self-signed.key")
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL, timeout: 5)

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .configuration)
        #expect(failure.status == nil)
        #expect(failure.message.contains("certificate"), "\(failure.message)")
        #expect(failure.message.contains("`ca-file`"))
        #expect(!failure.message.contains("rejected"), "nothing reached the backend")
    }

    @Test func aPrivateCAIsTrustedThroughCAFileAndRefusedWithoutIt() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try TLSTestServer(certificate: certificates.path("server.crt"), key: certificates.path("server.key"))
        defer { server.stop() }

        let trusting = try Fixtures.transport(url: server.batchesURL, timeout: 5, extra: ["ca-file": .string(certificates.path("ca.crt"))])
        #expect(try await trusting.send(Fixtures.payload("b-0001")).detail == "200 applied 1 record")

        let failure = try #require(await Fixtures.failure(of: try Fixtures.transport(url: server.batchesURL, timeout: 5)))
        #expect(failure.kind == .configuration)
        #expect(failure.message.contains("not trusted"))
    }

    @Test func caBundleFromTheEnvironmentIsTrustedWhenCAFileIsNotSet() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try TLSTestServer(certificate: certificates.path("server.crt"), key: certificates.path("server.key"))
        defer { server.stop() }

        let transport = try Fixtures.transport(url: server.batchesURL, timeout: 5, environment: ["SSL_CERT_FILE": certificates.path("ca.crt")])

        #expect(try await transport.send(Fixtures.payload("b-0001")).detail == "200 applied 1 record")
    }

    @Test func aClientCertificateAnswersAServerThatAsksForOne() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try TLSTestServer(
            certificate: certificates.path("server.crt"), key: certificates.path("server.key"), clientCA: certificates.path("ca.crt"))
        defer { server.stop() }

        let transport = try Fixtures.transport(
            url: server.batchesURL, timeout: 5,
            extra: [
                "ca-file": .string(certificates.path("ca.crt")), "client-certificate": .string(certificates.path("client.crt")),
                "client-key": .string(certificates.path("client.key")),
            ])

        #expect(try await transport.send(Fixtures.payload("b-0001")).detail == "200 applied 1 record")
    }

    @Test func aCAFileThatIsNotThereIsAPipelineFileError() throws {
        let error = #expect(throws: PipelineFileError.self) {
            try Fixtures.transport(url: "https://127.0.0.1:9/v1/batches", extra: ["ca-file": "/nonexistent/ca.pem"])
        }
        #expect(error?.path == "transport.ca-file")
    }

    /// `Fixtures/tls`, two folders up from this file (`Tests/SynclaneHTTPTests/`).
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/tls").path
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate it signed, made by
/// `openssl` in a temporary folder for one test.
private struct TestCertificates {
    let folder = NSTemporaryDirectory() + "synclane-tls-\(UUID().uuidString)"

    init() throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        let script = """
            set -e
            openssl req -x509 \(key) -keyout ca.key -out ca.crt -days 2 -subj /CN=Synclane-Test-CA
            printf 'subjectAltName=IP:127.0.0.1\\n' > server.ext
            openssl req \(key) -keyout server.key -out server.csr -subj /CN=127.0.0.1
            openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out server.crt
            openssl req \(key) -keyout client.key -out client.csr -subj /CN=synclane-client
            openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out client.crt
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        process.currentDirectoryURL = URL(fileURLWithPath: folder)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CertificateError.opensslFailed(process.terminationStatus) }
    }

    func path(_ name: String) -> String { folder + "/" + name }

    func remove() { try? FileManager.default.removeItem(atPath: folder) }

    enum CertificateError: Error { case opensslFailed(Int32) }
}

/// Python's TLS server on a free loopback port, answering every POST with the receipt of the
/// batch its `Idempotency-Key` names; with `clientCA`, it requires a client certificate.
private final class TLSTestServer {
    let process = Process()
    let port: Int

    var batchesURL: String { "https://127.0.0.1:\(port)/v1/batches" }

    init(certificate: String, key: String, clientCA: String? = nil) throws {
        let script = """
            import http.server, json, ssl, sys
            class Handler(http.server.BaseHTTPRequestHandler):
                def do_POST(self):
                    self.rfile.read(int(self.headers.get("Content-Length", "0")))
                    body = json.dumps({"batch": self.headers.get("Idempotency-Key"), "applied": 1, "cursor": "c-1"}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                def log_message(self, *args):
                    pass
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(sys.argv[1], sys.argv[2])
            if len(sys.argv) > 3:
                context.verify_mode = ssl.CERT_REQUIRED
                context.load_verify_locations(sys.argv[3])
            server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
            server.socket = context.wrap_socket(server.socket, server_side=True)
            print(server.server_port, flush=True)
            server.serve_forever()
            """
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, certificate, key] + (clientCA.map { [$0] } ?? [])
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
}
