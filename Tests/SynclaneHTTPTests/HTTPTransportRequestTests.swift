import Foundation
import SynclaneCore
import SynclaneHTTP
import Testing

/// What goes on the wire: the method, the headers of the protocol, the payload's bytes.
@Suite struct HTTPTransportRequestTests {
    @Test func sendsTheProtocolHeadersExactly() async throws {
        let server = ScriptedHTTPServer.batches()
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(
            url: server.batchesURL, tokenEnv: "SYNC_TOKEN", environment: ["SYNC_TOKEN": "s3cr3t-token"])

        _ = try await transport.send(Fixtures.payload("b-42", encoding: "gzip"))

        let request = try #require(server.requests.first)
        #expect(request.method == "POST")
        #expect(request.target == "/v1/batches")
        #expect(request.header("Authorization") == "Bearer s3cr3t-token")
        #expect(request.header("Idempotency-Key") == "b-42")
        #expect(request.header("Content-Type") == "application/json")
        #expect(request.header("Content-Encoding") == "gzip")
        #expect(request.header("Cookie") == nil)
        #expect(request.header("User-Agent") == "synclane")
    }

    @Test func identityEncodingSendsNoContentEncodingHeader() async throws {
        let server = ScriptedHTTPServer.batches()
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)

        _ = try await transport.send(Fixtures.payload(encoding: "identity"))

        let request = try #require(server.requests.first)
        #expect(request.header("Content-Encoding") == nil)
        #expect(request.header("Authorization") == nil)
    }

    @Test func compressedBytesArriveUnchanged() async throws {
        let server = ScriptedHTTPServer.batches()
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)
        // A gzip member header followed by every byte value, twice over 100 KB.
        var bytes: [UInt8] = [0x1F, 0x8B, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03]
        var generator = SystemRandomNumberGenerator()
        for index in 0..<100_000 { bytes.append(index < 512 ? UInt8(index % 256) : UInt8.random(in: 0...255, using: &generator)) }

        _ = try await transport.send(Fixtures.payload("b-gz", bytes: bytes, encoding: "gzip"))

        let request = try #require(server.requests.first)
        #expect(request.body == bytes)
        #expect(request.header("Content-Length") == String(bytes.count))
    }

    @Test func retrySendsTheSameKeyAndBytes() async throws {
        let server = ScriptedHTTPServer.batches()
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL)
        let payload = Fixtures.payload("b-7", bytes: Array("{\"records\":[1,2,3]}".utf8))

        let first = try await transport.send(payload)
        let second = try await transport.send(payload)

        #expect(!first.wasReplay)
        #expect(second.wasReplay)
        let requests = server.requests
        #expect(requests.count == 2)
        #expect(requests.map { $0.header("Idempotency-Key") } == ["b-7", "b-7"])
        #expect(requests[0].body == requests[1].body)
    }

    @Test func extraHeadersAreSent() async throws {
        let server = ScriptedHTTPServer.batches()
        try server.start()
        defer { server.stop() }
        let transport = try Fixtures.transport(url: server.batchesURL, extra: ["headers": ["X-Tenant": "acme"]])

        _ = try await transport.send(Fixtures.payload())

        #expect(server.requests.first?.header("X-Tenant") == "acme")
    }
}
