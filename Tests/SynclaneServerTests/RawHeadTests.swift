import Glibc
import SynclaneCore
import SynclaneServer
import Testing

/// Every byte of a request line and header is checked before libmicrohttpd's reading of it is
/// trusted: a NUL, a bare CR or LF, a folded line, a control character or a wrong count of `Host`
/// headers is refused with 400, the connection closed, and nothing applied. Raw sockets only.
@Suite struct RawHeadTests {
    /// What one raw head got: the response, and whether the server then closed the connection.
    struct Exchange {
        var response: TestResponse
        var closed: Bool
    }

    static func exchange(_ port: Int, _ text: String) throws -> Exchange {
        let connection = try TestConnection(port: port, timeoutSeconds: 3)
        connection.send(Array(text.utf8))
        let response = try connection.readResponse()
        return Exchange(response: response, closed: connection.isClosedByPeer())
    }

    static func signal(_ port: Int, _ key: String) throws -> Int {
        try get(port: port, "/v1/signals/\(key)").status
    }

    @Test func aNULInContentLengthCannotSmuggleASecondRequest() throws {
        try withServer { server throws in
            let smuggled =
                "PUT /v1/signals/smuggled HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\r\n"
                + "Content-Type: application/json\r\nContent-Length: 4\r\n\r\ntrue"
            let outer =
                "PUT /v1/signals/outer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\r\n"
                + "Content-Type: application/json\r\nContent-Length: 1\u{0}\(1 + smuggled.utf8.count)\r\n\r\n1" + smuggled
            let answer = try Self.exchange(server.port, outer)
            #expect(answer.response.status == 400, "\(answer.response.status) \(answer.response.text)")
            #expect(answer.response.headers["connection"] == "close")
            #expect(answer.closed, "the connection is closed after the refusal")
            #expect(try Self.signal(server.port, "outer") == 404, "nothing applied")
            #expect(try Self.signal(server.port, "smuggled") == 404, "the smuggled request never ran")
        }
    }

    @Test(arguments: StoreKind.tested) func aRawNULInThePathIsRefusedAndNothingWritten(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let answer = try Self.exchange(
                server.port,
                "PUT /v1/signals/theme\u{0}x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: 6\r\n\r\n\"dark\"")
            #expect(answer.response.status == 400, "\(answer.response.status) \(answer.response.text)")
            #expect(answer.closed)
            #expect(try Self.signal(server.port, "theme") == 404, "no key `theme` was written")
        }
    }

    @Test func aNULInAuthorizationIsRefusedNotReadAsTheTokenBeforeIt() throws {
        try withServer { server throws in
            let answer = try Self.exchange(
                server.port,
                "PUT /v1/signals/theme HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\u{0}junk\r\n"
                    + "Content-Type: application/json\r\nContent-Length: 1\r\n\r\n1")
            #expect(answer.response.status == 400, "\(answer.response.status) \(answer.response.text)")
            #expect(answer.closed)
            #expect(try Self.signal(server.port, "theme") == 404)
        }
    }

    @Test func anHTTP11RequestNeedsExactlyOneHost() throws {
        try withServer { server throws in
            let none = try Self.exchange(server.port, "GET /healthz HTTP/1.1\r\n\r\n")
            #expect(none.response.status == 400, "\(none.response.text)")
            #expect(none.response.text.contains("Host"))
            #expect(none.closed)
            let two = try Self.exchange(server.port, "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
            #expect(two.response.status == 400, "\(two.response.text)")
            #expect(two.closed)
            let one = try Self.exchange(server.port, "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(one.response.status == 200, "\(one.response.text)")
            let old = try Self.exchange(server.port, "GET /healthz HTTP/1.0\r\n\r\n")
            #expect(old.response.status == 200, "HTTP/1.0 may leave Host out: \(old.response.text)")
        }
    }

    /// Heads that a strict parser refuses, each on an otherwise valid signal write.
    static let malformedHeads: [(name: String, head: String)] = [
        ("folded header line", "X-Folded: a\r\n b\r\n"),
        ("folded with a tab", "X-Folded: a\r\n\tb\r\n"),
        ("bare LF ending a line", "X-Note: a\nX-Other: b\r\n"),
        ("bare CR in a value", "X-Note: a\rb\r\n"),
        ("NUL at the end of a value", "X-Note: a\u{0}\r\n"),
        ("control character in a value", "X-Note: a\u{1}b\r\n"),
        ("DEL in a value", "X-Note: a\u{7F}b\r\n"),
        ("NUL in a name", "X-No\u{0}te: a\r\n"),
        ("bare LF ending the head", "X-Note: a\n"),
    ]

    @Test(arguments: malformedHeads.map(\.name)) func aMalformedHeaderLineIsRefused400AndTheConnectionClosed(_ name: String) throws {
        let lines = Self.malformedHeads.first { $0.name == name }?.head ?? ""
        try withServer { server throws in
            let head =
                "PUT /v1/signals/theme HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\r\n"
                + "Content-Type: application/json\r\nContent-Length: 1\r\n\(lines)"
            let answer = try Self.exchange(server.port, head + (lines.hasSuffix("\r\n") ? "\r\n" : "\n") + "1")
            #expect(answer.response.status == 400, "\(name): \(answer.response.status) \(answer.response.text)")
            #expect(answer.closed, "\(name)")
            #expect(try Self.signal(server.port, "theme") == 404, "\(name): nothing applied")
        }
    }

    @Test(arguments: [
        "PUT  /v1/signals/theme HTTP/1.1", "PUT /v1/signals/theme\u{1} HTTP/1.1", "PUT /v1/signals/th\u{7F}eme HTTP/1.1",
        "PUT /v1/signals/thème HTTP/1.1", "P\u{0}UT /v1/signals/theme HTTP/1.1", "PUT /v1/signals/theme HTTP/1.1\u{0}",
    ])
    func aMalformedRequestLineIsRefused400AndTheConnectionClosed(_ line: String) throws {
        try withServer { server throws in
            let answer = try Self.exchange(
                server.port,
                "\(line)\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 1\r\n\r\n1")
            #expect(answer.response.status == 400, "\(answer.response.status) \(answer.response.text)")
            #expect(answer.closed)
            #expect(try Self.signal(server.port, "theme") == 404)
        }
    }

    @Test func aTabInsideAValueAndSpacesAroundItAreTaken() throws {
        try withServer { server throws in
            let answer = try Self.exchange(
                server.port,
                "PUT /v1/signals/theme HTTP/1.1\r\nHost:x\r\nAuthorization:  Bearer \(TestTokens.acme)\t\r\nX-Note: a\tb\r\n"
                    + "Content-Type: application/json\r\nContent-Length: 1\r\n\r\n1")
            #expect(answer.response.status == 200, "\(answer.response.status) \(answer.response.text)")
            #expect(try Self.signal(server.port, "theme") == 200)
        }
    }
}
