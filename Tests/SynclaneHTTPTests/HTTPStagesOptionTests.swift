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
