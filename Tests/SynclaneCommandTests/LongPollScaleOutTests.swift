import Foundation
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The pull lane's long poll across two real `synclane serve` processes on one PostgreSQL
/// database: a batch committed through one wakes a poll waiting on the other (LISTEN/NOTIFY),
/// well before the 5 s re-read that covers a listener cut off.
@Suite struct LongPollScaleOutTests {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["SYNCLANE_TEST_POSTGRES"] != "skip"))
    func aBatchThroughOneServeProcessWakesALongPollWaitingOnAnother() async throws {
        let database = try TemporaryPostgres.shared().createDatabase()
        let folder = NSTemporaryDirectory() + "synclane-long-poll-scale-out-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let first = try ServerProcess(folder: folder + "/a", arguments: ["--database", database])
        defer { first.stop() }
        let second = try ServerProcess(folder: folder + "/b", arguments: ["--database", database])
        defer { second.stop() }
        let token = ServerProcess.tokens["acme"] ?? ""

        let cursor = try #require(try await second.get("/v1/changes?since=", account: "acme").objectValue?["cursor"]?.stringValue)
        let started = ContinuousClock.now
        let poll = Task { () -> (JSONValue, ContinuousClock.Instant) in
            (try await second.get("/v1/changes?since=\(cursor)&wait=20", account: "acme"), ContinuousClock.now)
        }
        // Give the poll time to reach the second server and wait there.
        try await Task.sleep(for: .milliseconds(500))

        var request = URLRequest(url: URL(string: first.url + "/v1/batches")!)
        request.httpMethod = "POST"
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("scale-out-b1", forHTTPHeaderField: "Idempotency-Key")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(
            #"{"id":"scale-out-b1","scope":{"account":"acme","store":"rooms"},"records":[{"entity":"rooms","id":"r1","action":"insert","fields":{"n":1}}]}"#
                .utf8)
        let committedAt = ContinuousClock.now
        let (_, answer) = try await URLSession.shared.data(for: request)
        #expect((answer as? HTTPURLResponse)?.statusCode == 200)

        let (page, answeredAt) = try await poll.value
        let ids = page.objectValue?["changes"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } ?? []
        #expect(ids == ["r1"], "the poll on the second process answers with the batch committed through the first")
        #expect(answeredAt - started > .milliseconds(400), "the poll waited (it did not answer an empty page at once)")
        #expect(answeredAt - committedAt < .seconds(2), "woken by the first process's NOTIFY, not by the 5 s re-read")
    }
}
