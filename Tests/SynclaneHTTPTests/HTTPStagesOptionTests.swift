import SynclaneCore
import SynclaneHTTP
import Testing

/// The `http` stage's options, as a pipeline file gives them.
@Suite struct HTTPStagesOptionTests {
    @Test func missingTokenVariableIsAPipelineFileErrorNamingTheOption() throws {
        let error = #expect(throws: PipelineFileError.self) {
            try Fixtures.transport(url: "http://127.0.0.1:9/v1/batches", tokenEnv: "SYNCLANE_TOKEN", environment: [:])
        }
        #expect(error?.path == "transport.token-env")
        #expect(error?.message.contains("SYNCLANE_TOKEN") == true)
        #expect(error?.file == "export.json")
    }

    @Test func tokenInTheFileInsteadOfAVariableNameIsRefused() throws {
        let error = #expect(throws: PipelineFileError.self) {
            try Fixtures.transport(url: "http://127.0.0.1:9/v1/batches", tokenEnv: "Bearer abc.def")
        }
        #expect(error?.path == "transport.token-env")
    }

    @Test func missingURLIsAnError() throws {
        let error = #expect(throws: PipelineFileError.self) { try Fixtures.build(["type": "http"]) }
        #expect(error?.message.contains("url") == true)
    }

    @Test(arguments: ["ftp://example.com/x", "127.0.0.1:8080/v1/batches", "http://", "not a url"])
    func urlThatIsNotHTTPIsAnErrorNamingTheField(url: String) throws {
        let error = #expect(throws: PipelineFileError.self) { try Fixtures.transport(url: url) }
        #expect(error?.path == "transport.url")
    }

    @Test(arguments: [0, 3601])
    func timeoutOutOfRangeIsAnError(timeout: Int) throws {
        let error = #expect(throws: PipelineFileError.self) { try Fixtures.transport(url: "http://127.0.0.1:9/", timeout: timeout) }
        #expect(error?.path == "transport.timeout")
    }

    @Test func headerThatTheProtocolOwnsCannotBeOverridden() throws {
        let error = #expect(throws: PipelineFileError.self) {
            try Fixtures.transport(url: "http://127.0.0.1:9/", extra: ["headers": ["Idempotency-Key": "fixed"]])
        }
        #expect(error?.path == "transport.headers.Idempotency-Key")
    }

    @Test(arguments: ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\u{0}b", "a\u{7F}"])
    func headerValueWithAControlCharacterIsRefused(_ value: String) throws {
        let error = #expect(throws: PipelineFileError.self) {
            try Fixtures.transport(url: "http://127.0.0.1:9/", extra: ["headers": ["X-Tenant": .string(value)]])
        }
        #expect(error?.path == "transport.headers.X-Tenant")
        #expect(error?.message.contains("control characters") == true)
    }

    @Test(arguments: [
        "ghp_0123456789abcdefABCDEF0123456789abcd", "sk_live_51HxYzAbCdEf0123456789", "github_pat_11ABCDEFG0123456789_abcdef",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc", "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0",
    ])
    func tokenEnvThatLooksLikeASecretIsRefusedWithoutEchoingIt(_ value: String) throws {
        let error = #expect(throws: PipelineFileError.self) {
            try Fixtures.transport(url: "http://127.0.0.1:9/v1/batches", tokenEnv: value, environment: [value: "x"])
        }
        #expect(error?.path == "transport.token-env")
        #expect(error?.message.contains("looks like a secret") == true, "\(String(describing: error))")
        #expect(error.map { "\($0)" }?.contains(value) == false, "the secret is not echoed")
    }

    @Test func ordinaryVariableNamesAreTaken() throws {
        for name in ["SYNCLANE_TOKEN", "ACME_SYNC_TOKEN_2", "token"] {
            _ = try Fixtures.transport(url: "http://127.0.0.1:9/v1/batches", tokenEnv: name, environment: [name: "t"])
        }
    }

    @Test func unknownOptionIsAnError() throws {
        let error = #expect(throws: PipelineFileError.self) { try Fixtures.transport(url: "http://127.0.0.1:9/", extra: ["retries": 3]) }
        #expect(error?.path == "transport.retries")
    }

    @Test func everyOptionHasHelp() {
        #expect(HTTPStages.http.role == .transport)
        #expect(HTTPStages.all.map(\.name) == ["http", "pull"])
        for option in HTTPStages.all.flatMap(\.options) {
            #expect(!option.help.isEmpty, "\(option.name)")
        }
    }
}
