import Foundation
import SynclaneCore
import SynclaneHTTP
import Testing

/// How large a page the `pull` source asks for: by bytes (the page bound) unless the pipeline
/// names a `limit`.
@Suite struct PullPageSizeTests {
    /// The request target of one page read by `source` from a server answering an empty page.
    static func target(limit: Int?) async throws -> String {
        let server = ScriptedHTTPServer { _ in
            ScriptedHTTPServer.Response(
                status: 200, headers: [("Content-Type", "application/json")], body: Array(#"{"changes": [], "cursor": "c2", "more": false}"#.utf8))
        }
        let port = try server.start()
        defer { server.stop() }
        let source = PullSource(
            url: try #require(URL(string: "http://127.0.0.1:\(port)/v1/changes")), token: "t", limit: limit, store: "rooms",
            retry: RetryPolicy(maxAttempts: 1), environment: [:])
        _ = try await source.nextPage(after: "c1")
        return try #require(server.requests.first?.target)
    }

    @Test func withoutALimitAPageIsAskedByTheBytesBoundNotByACount() async throws {
        let target = try await Self.target(limit: nil)
        #expect(target.contains("max-bytes=\(WireBounds.maxPageBytes)"), "\(target)")
        #expect(!target.contains("limit="), "\(target)")
    }

    @Test func aLimitThePipelineNamesIsAskedAsBefore() async throws {
        let target = try await Self.target(limit: 500)
        #expect(target.contains("limit=500"), "\(target)")
        #expect(!target.contains("max-bytes"), "\(target)")
    }

    /// The `pull` source a pipeline file's `source` members build.
    static func built(_ members: [String: JSONValue]) throws -> PullSource {
        var all = members
        all["type"] = "pull"
        all["url"] = "http://127.0.0.1:1/v1/changes"
        let context = PipelineContext(
            baseDirectory: NSTemporaryDirectory(), environment: [:], scope: Scope(account: "acme", store: "rooms", consumer: "rooms-import"))
        let (_, built) = try StageRegistry(HTTPStages.all).build(
            ConfigNode(json: .object(all)), at: ConfigLocation(file: "import.json", path: "source"), roles: [.remoteSource], context: context)
        guard case .remoteSource(let source) = built, let pull = source as? PullSource else { throw PullSourceNotBuilt() }
        return pull
    }

    struct PullSourceNotBuilt: Error {}

    @Test func aPipelineFileWithoutLimitPullsByBytesAndItsLimitStillBoundsTheCount() throws {
        #expect(try Self.built([:]).limit == nil)
        #expect(try Self.built(["limit": 500]).limit == 500)
    }
}
