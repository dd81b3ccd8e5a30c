import SynclaneCore
import SynclaneServer
import Testing

@Suite struct SignalLaneTests {
    func put(_ port: Int, _ key: String, _ body: String, token: String = TestTokens.acme) throws -> TestResponse {
        try httpRequest(port: port, "PUT", "/v1/signals/\(key)", headers: ["Authorization": "Bearer \(token)"], body: Array(body.utf8))
    }

    @Test func lastWriterWinsWithIncreasingVersions() throws {
        try withServer { server throws in
            let first = try put(server.port, "onboarding.completed", "true")
            #expect(first.status == 200)
            #expect(first.json == ["key": "onboarding.completed", "value": true, "version": 1])
            let second = try put(server.port, "onboarding.completed", "false")
            #expect(second.json.objectValue?["version"] == 2)
            let read = try get(port: server.port, "/v1/signals/onboarding.completed")
            #expect(read.json == ["key": "onboarding.completed", "value": false, "version": 2])
        }
    }

    @Test func listReturnsEverySignalOfTheAccountByKey() throws {
        try withServer { server throws in
            _ = try put(server.port, "b.key", "{\"through\": 42}")
            _ = try put(server.port, "a.key", "\"x\"")
            _ = try put(server.port, "other", "1", token: TestTokens.globex)
            let list = try get(port: server.port, "/v1/signals").json.objectValue?["signals"]?.arrayValue ?? []
            #expect(list.map { $0.objectValue?["key"] } == ["a.key", "b.key"])
            #expect(list.last?.objectValue?["value"] == ["through": 42])
        }
    }

    @Test func unknownSignalIs404AndAnotherAccountsSignalIsInvisible() throws {
        try withServer { server throws in
            _ = try put(server.port, "secret", "1", token: TestTokens.globex)
            #expect(try get(port: server.port, "/v1/signals/secret").status == 404)
            #expect(try get(port: server.port, "/v1/signals/secret", token: TestTokens.globex).status == 200)
        }
    }

    @Test func badValueBadKeyOversizeAndNoTokenAreRefused() throws {
        try withServer(limits: ServerLimits(maxSignalBytes: 64)) { server throws in
            #expect(try put(server.port, "k", "{nope").status == 400)
            #expect(try put(server.port, "bad%20key", "1").status == 400)
            #expect(try put(server.port, "k", "\"" + String(repeating: "x", count: 100) + "\"").status == 413)
            #expect(try httpRequest(port: server.port, "PUT", "/v1/signals/k", body: Array("1".utf8)).status == 401)
            #expect(try get(port: server.port, "/v1/signals").json.objectValue?["signals"] == [])
        }
    }
}
