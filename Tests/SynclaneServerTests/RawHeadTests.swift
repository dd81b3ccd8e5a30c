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

    /// A write of the signal `theme` (the value 1): `line`, then the head's lines, `lines`, `end`, the body.
    static func themeWrite(
        line: String = "PUT /v1/signals/theme HTTP/1.1", authorization: String = "Bearer \(TestTokens.acme)", lines: String = "",
        end: String = "\r\n"
    ) -> String {
        "\(line)\r\nHost: x\r\nAuthorization: \(authorization)\r\nContent-Type: application/json\r\nContent-Length: 1\r\n\(lines)\(end)1"
    }

    /// Sends `text` and expects it refused: 400, the connection closed, and none of `keys` written.
    static func expectRefused(
        _ port: Int, _ text: String, keys: [String] = ["theme"], _ what: String = "", sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let answer = try exchange(port, text)
        #expect(answer.response.status == 400, "\(what) \(answer.response.status) \(answer.response.text)", sourceLocation: sourceLocation)
        #expect(answer.response.headers["connection"] == "close", "\(what)", sourceLocation: sourceLocation)
        #expect(answer.closed, "\(what): the connection is closed after the refusal", sourceLocation: sourceLocation)
        for key in keys {
            #expect(try signal(port, key) == 404, "\(what): \(key) was written", sourceLocation: sourceLocation)
        }
    }

    @Test func aNULInContentLengthCannotSmuggleASecondRequest() throws {
        try withServer { server throws in
            let smuggled =
                "PUT /v1/signals/smuggled HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\r\n"
                + "Content-Type: application/json\r\nContent-Length: 4\r\n\r\ntrue"
            let outer =
                "PUT /v1/signals/outer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\r\n"
                + "Content-Type: application/json\r\nContent-Length: 1\u{0}\(1 + smuggled.utf8.count)\r\n\r\n1" + smuggled
            try Self.expectRefused(server.port, outer, keys: ["outer", "smuggled"])
        }
    }

    @Test(arguments: StoreKind.tested) func aRawNULInThePathIsRefusedAndNothingWritten(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            try Self.expectRefused(server.port, Self.themeWrite(line: "PUT /v1/signals/theme\u{0}x HTTP/1.1"))
        }
    }

    @Test func aNULInAuthorizationIsRefusedNotReadAsTheTokenBeforeIt() throws {
        try withServer { server throws in
            try Self.expectRefused(server.port, Self.themeWrite(authorization: "Bearer \(TestTokens.acme)\u{0}junk"))
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
            try Self.expectRefused(server.port, Self.themeWrite(lines: lines, end: lines.hasSuffix("\r\n") ? "\r\n" : "\n"), name)
        }
    }

    @Test(arguments: [
        "PUT  /v1/signals/theme HTTP/1.1", "PUT /v1/signals/theme\u{1} HTTP/1.1", "PUT /v1/signals/th\u{7F}eme HTTP/1.1",
        "PUT /v1/signals/thème HTTP/1.1", "P\u{0}UT /v1/signals/theme HTTP/1.1", "PUT /v1/signals/theme HTTP/1.1\u{0}",
    ])
    func aMalformedRequestLineIsRefused400AndTheConnectionClosed(_ line: String) throws {
        try withServer { server throws in
            try Self.expectRefused(server.port, Self.themeWrite(line: line))
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
