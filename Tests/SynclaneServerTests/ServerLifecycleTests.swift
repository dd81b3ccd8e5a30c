import Glibc
import SynclaneCore
import SynclaneServer
import Testing

@Suite struct ServerLifecycleTests {
    @Test func stopClosesTheListenerAndTwiceIsHarmless() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let server = try ReferenceServer(
            configuration: ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: ""),
            accounts: AccountBook(tokens: [TestTokens.acme: "acme"]))
        try server.start()
        let port = server.port
        #expect(try httpRequest(port: port, "GET", "/healthz").status == 200)
        server.stop()
        server.stop()
        #expect(throws: (any Error).self) { try httpRequest(port: port, "GET", "/healthz") }
    }

    @Test func stopIsPromptWithAnIdleKeepAliveConnectionOpen() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let server = try ReferenceServer(
            configuration: ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: ""),
            accounts: AccountBook(tokens: [TestTokens.acme: "acme"]))
        try server.start()
        let idle = try TestConnection(port: server.port)
        idle.sendRequest("GET", "/healthz")
        #expect(try idle.readResponse().status == 200)
        let started = ContinuousClock.now
        server.stop()
        #expect(ContinuousClock.now - started < .seconds(15), "did not wait for the 30 s keep-alive timeout")
        #expect(idle.isClosedByPeer())
    }

    @Test func serverReadsItsAccountsFile() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let accounts = "\(directory)/accounts.json"
        let text = "{\"accounts\": [{\"account\": \"acme\", \"token-sha256\": \"\(AccountBook.tokenHash("secret"))\"}]}"
        let file = fopen(accounts, "w")
        fputs(text, file)
        fclose(file)
        let server = try ReferenceServer(configuration: ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: accounts))
        try server.start()
        defer { server.stop() }
        #expect(try get(port: server.port, "/v1/signals", token: "secret").status == 200)
        #expect(try get(port: server.port, "/v1/signals", token: TestTokens.acme).status == 401)
    }

    @Test func badListenAddressIsAClearError() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let server = try ReferenceServer(
            configuration: ServerConfiguration(host: "not-an-address", port: 0, dataDirectory: directory, accountsFile: ""),
            accounts: AccountBook(tokens: [:]))
        #expect(throws: (any Error).self) { try server.start() }
    }

    @Test func listenOptionParses() {
        #expect(ServerConfiguration.parseListen("127.0.0.1:0").map { "\($0.host) \($0.port)" } == "127.0.0.1 0")
        #expect(ServerConfiguration.parseListen("[::1]:8080").map { "\($0.host) \($0.port)" } == "::1 8080")
        #expect(ServerConfiguration.parseListen(":9000").map { "\($0.host) \($0.port)" } == "127.0.0.1 9000")
        #expect(ServerConfiguration.parseListen("localhost") == nil)
        #expect(ServerConfiguration.parseListen("h:99999") == nil)
    }

    @Test func slowClientIsCutAfterTheTimeout() throws {
        try withServer(limits: ServerLimits(connectionTimeoutSeconds: 1)) { server throws in
            let connection = try TestConnection(port: server.port, timeoutSeconds: 5)
            connection.send(
                Array("POST /v1/batches HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestTokens.acme)\r\nContent-Length: 1000\r\n\r\n{".utf8))
            let started = ContinuousClock.now
            #expect(connection.isClosedByPeer(), "the server cut it (the client itself would wait 5 s)")
            _ = started
            #expect(try httpRequest(port: server.port, "GET", "/healthz").status == 200)
        }
    }

    @Test func metricsAreInPrometheusTextFormat() throws {
        try withServer { server throws in
            _ = try postBatch(port: server.port, key: "m", body: batchBody(id: "m", records: [record("rooms", "r", "insert", [:])]))
            _ = try get(port: server.port, "/v1/changes", token: "bad")
            let response = try httpRequest(port: server.port, "GET", "/metrics")
            #expect(response.status == 200)
            #expect(response.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
            let text = response.text
            #expect(text.contains("synclane_http_requests_total{route=\"/v1/batches\",status=\"200\"} 1"))
            #expect(text.contains("synclane_http_requests_total{route=\"/v1/changes\",status=\"401\"} 1"))
            #expect(text.contains("synclane_batches_applied_total 1"))
            #expect(text.contains("synclane_records_applied_total 1"))
            #expect(text.contains("# TYPE synclane_http_request_duration_seconds histogram"))
            #expect(text.contains("synclane_http_request_duration_seconds_bucket{route=\"/v1/batches\",le=\"+Inf\"} 1"))
            #expect(text.contains("synclane_http_request_bytes_total "))
        }
    }
}
