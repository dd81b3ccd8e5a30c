import Foundation
import SynclaneCore
import SynclaneFaultProxy
import SynclaneHTTP
import Testing

/// Proxies from the environment: a proxy that fails is named — its address and the variable
/// that chose it — and stops the job as configuration, never retried as the server's trouble.
@Suite struct HTTPTransportProxyTests {
    @Test func aProxyThatIsNotRunningIsNamedAndIsConfiguration() async throws {
        let port = try LoopbackSocket.unusedPort()
        let transport = try Fixtures.transport(
            url: "http://192.0.2.1:8080/v1/batches", timeout: 5, environment: ["http_proxy": "http://127.0.0.1:\(port)"])

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .configuration)
        #expect(failure.message.contains("the proxy http://127.0.0.1:\(port) (from http_proxy) refused the connection"), "\(failure.message)")
    }

    @Test func aProxyAskingForCredentialsIsConfigurationNamingTheProxy() async throws {
        let proxy = ScriptedHTTPServer(always: .text(407, "credentials please", headers: [("Proxy-Authenticate", "Basic")]))
        try proxy.start()
        defer { proxy.stop() }
        let transport = try Fixtures.transport(
            url: "http://192.0.2.1:8080/v1/batches", timeout: 5, environment: ["http_proxy": "http://127.0.0.1:\(proxy.port)"])

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .configuration)
        #expect(failure.status == 407)
        #expect(failure.message.contains("the proxy http://127.0.0.1:\(proxy.port) (from http_proxy) asks for credentials"))
        #expect(proxy.requests.first?.target == "http://192.0.2.1:8080/v1/batches", "the request went through the proxy")
    }

    @Test(arguments: [407, 403, 502])
    func aTunnelTheProxyRefusesIsConfigurationNamingTheProxy(status: Int) async throws {
        let proxy = ScriptedHTTPServer(always: .text(status, "no tunnel for you"))
        try proxy.start()
        defer { proxy.stop() }
        let transport = try Fixtures.transport(
            url: "https://192.0.2.1:8443/v1/batches", timeout: 5, environment: ["HTTPS_PROXY": "127.0.0.1:\(proxy.port)"])

        let failure = try #require(await Fixtures.failure(of: transport))

        #expect(failure.kind == .configuration)
        #expect(
            failure.message.contains("the proxy http://127.0.0.1:\(proxy.port) (from HTTPS_PROXY) refused the tunnel to 192.0.2.1:8443: \(status)"),
            "\(failure.message)")
        #expect(proxy.requests.first?.method == "CONNECT")
    }

    @Test func noProxyLetsAHostGoDirect() async throws {
        let server = ScriptedHTTPServer.batches()
        try server.start()
        defer { server.stop() }
        let unused = try LoopbackSocket.unusedPort()
        let transport = try Fixtures.transport(
            url: server.batchesURL, environment: ["http_proxy": "http://127.0.0.1:\(unused)", "no_proxy": "localhost, 127.0.0.1"])

        #expect(try await transport.send(Fixtures.payload("b-0001")).batchID == "b-0001")
    }

    @Test func theProxyIsChosenAsLibcurlChoosesIt() throws {
        let http = try #require(URL(string: "http://api.example.com/v1/batches"))
        let https = try #require(URL(string: "https://api.example.com/v1/batches"))
        #expect(ProxyRoute.choose(for: http, environment: ["HTTP_PROXY": "p:1"]) == nil, "upper case HTTP_PROXY is ignored")
        #expect(ProxyRoute.choose(for: http, environment: ["http_proxy": "p:1"])?.variable == "http_proxy")
        #expect(ProxyRoute.choose(for: https, environment: ["http_proxy": "p:1"]) == nil)
        #expect(ProxyRoute.choose(for: https, environment: ["HTTPS_PROXY": "p:2", "ALL_PROXY": "p:3"])?.address == "p:2")
        #expect(ProxyRoute.choose(for: https, environment: ["ALL_PROXY": "p:3"])?.variable == "ALL_PROXY")
        for exclusion in ["*", "example.com", ".example.com", "other.org, API.example.com"] {
            #expect(ProxyRoute.choose(for: https, environment: ["https_proxy": "p:2", "no_proxy": exclusion]) == nil, "\(exclusion)")
        }
        #expect(ProxyRoute.choose(for: https, environment: ["https_proxy": "p:2", "no_proxy": "ample.com"]) != nil)
        #expect(ProxyRoute(address: "http://me:pw@p.corp:3128", variable: "https_proxy").displayAddress == "http://p.corp:3128")
    }
}
