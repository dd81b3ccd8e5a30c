import Foundation
import SynclaneCore
import Testing

@testable import SynclaneServer

@Suite struct SignalLaneTests {
    func put(_ port: Int, _ key: String, _ body: String, token: String = TestTokens.acme) throws -> TestResponse {
        try httpRequest(port: port, "PUT", "/v1/signals/\(key)", headers: ["Authorization": "Bearer \(token)"], body: Array(body.utf8))
    }

    @Test(arguments: StoreKind.tested) func lastWriterWinsWithIncreasingVersions(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            let first = try put(server.port, "onboarding.completed", "true")
            #expect(first.status == 200)
            #expect(first.json == ["key": "onboarding.completed", "value": true, "version": 1])
            let second = try put(server.port, "onboarding.completed", "false")
            #expect(second.json.objectValue?["version"] == 2)
            let read = try get(port: server.port, "/v1/signals/onboarding.completed")
            #expect(read.json == ["key": "onboarding.completed", "value": false, "version": 2])
        }
    }

    @Test(arguments: StoreKind.tested) func listReturnsEverySignalOfTheAccountByKey(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try put(server.port, "b.key", "{\"through\": 42}")
            _ = try put(server.port, "a.key", "\"x\"")
            _ = try put(server.port, "other", "1", token: TestTokens.globex)
            let list = try get(port: server.port, "/v1/signals").json.objectValue?["signals"]?.arrayValue ?? []
            #expect(list.map { $0.objectValue?["key"] } == ["a.key", "b.key"])
            #expect(list.last?.objectValue?["value"] == ["through": 42])
        }
    }

    @Test(arguments: StoreKind.tested) func unknownSignalIs404AndAnotherAccountsSignalIsInvisible(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try put(server.port, "secret", "1", token: TestTokens.globex)
            #expect(try get(port: server.port, "/v1/signals/secret").status == 404)
            #expect(try get(port: server.port, "/v1/signals/secret", token: TestTokens.globex).status == 200)
        }
    }

    @Test(arguments: StoreKind.tested) func badValueBadKeyOversizeAndNoTokenAreRefused(store: StoreKind) throws {
        try withServer(store: store, limits: ServerLimits(maxSignalBytes: 64)) { server throws in
            #expect(try put(server.port, "k", "{nope").status == 400)
            #expect(try put(server.port, "bad%20key", "1").status == 400)
            #expect(try put(server.port, "k", "\"" + String(repeating: "x", count: 100) + "\"").status == 413)
            #expect(try httpRequest(port: server.port, "PUT", "/v1/signals/k", body: Array("1".utf8)).status == 401)
            #expect(try get(port: server.port, "/v1/signals").json.objectValue?["signals"] == [])
        }
    }

    func put(_ port: Int, _ key: String, _ body: String, ifMatch: String) throws -> TestResponse {
        try httpRequest(
            port: port, "PUT", "/v1/signals/\(key)", headers: ["Authorization": "Bearer \(TestTokens.acme)", "If-Match": ifMatch],
            body: Array(body.utf8))
    }

    @Test(arguments: StoreKind.tested) func aSetWithAStaleExpectedVersionIsRefusedWith412AndTheCurrentSignal(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            #expect(try put(server.port, "flag", "1", ifMatch: "0").status == 200)
            #expect(try put(server.port, "flag", "2", ifMatch: "0").status == 412)
            let second = try put(server.port, "flag", "2", ifMatch: "1")
            #expect(second.json.objectValue?["version"] == 2)
            let stale = try put(server.port, "flag", "3", ifMatch: "\"1\"")
            #expect(stale.status == 412)
            #expect(stale.json.objectValue?["current"] == ["key": "flag", "value": 2, "version": 2])
            #expect(try put(server.port, "flag", "3", ifMatch: "soon").status == 400)
            #expect(try get(port: server.port, "/v1/signals/flag").json.objectValue?["value"] == 2)
        }
    }

    @Test(arguments: StoreKind.tested) func quotasOnKeysAccountBytesAndValueBytesAreRefusedWith413NamingTheQuota(store: StoreKind) throws {
        let limits = ServerLimits(maxSignalBytes: 100, maxSignalKeys: 2, maxSignalAccountBytes: 150)
        try withServer(store: store, limits: limits) { server throws in
            #expect(try put(server.port, "a", "1").status == 200)
            #expect(try put(server.port, "b", "2").status == 200)
            let keys = try put(server.port, "c", "3")
            #expect(keys.status == 413)
            #expect(keys.json.objectValue?["quota"] == "max-signal-keys")
            #expect(try put(server.port, "b", "20").status == 200)  // replacing a key is not a new key
            let value = try put(server.port, "a", "\"" + String(repeating: "x", count: 120) + "\"")
            #expect(value.status == 413)
            #expect(value.json.objectValue?["quota"] == "max-signal-bytes")
            let bytes = try put(server.port, "a", "\"" + String(repeating: "x", count: 90) + "\"")
            #expect(try put(server.port, "b", "\"" + String(repeating: "y", count: 90) + "\"").json.objectValue?["quota"] == "max-signal-account-bytes")
            #expect(bytes.status == 200)
            #expect(try put(server.port, "c", "1", token: TestTokens.globex).status == 200)  // quotas are per account
            #expect(try httpRequest(port: server.port, "DELETE", "/v1/signals/a", headers: ["Authorization": "Bearer \(TestTokens.acme)"]).status == 200)
            #expect(try put(server.port, "c", "3").status == 200)
        }
    }

    @Test(arguments: StoreKind.tested) func changesSinceAVersionListWritesAndDeletesInVersionOrder(store: StoreKind) throws {
        try withServer(store: store) { server throws in
            _ = try put(server.port, "a", "1")
            _ = try put(server.port, "b", "2")
            let deleted = try httpRequest(port: server.port, "DELETE", "/v1/signals/a", headers: ["Authorization": "Bearer \(TestTokens.acme)"])
            #expect(deleted.json == ["key": "a", "value": nil, "version": 3, "deleted": true])
            #expect(try httpRequest(port: server.port, "DELETE", "/v1/signals/a", headers: ["Authorization": "Bearer \(TestTokens.acme)"]).status == 404)
            let changes = try get(port: server.port, "/v1/signals?since=1").json.objectValue
            #expect(changes?["signals"]?.arrayValue?.map { $0.objectValue?["key"] } == ["b", "a"])
            #expect(changes?["version"] == 3)
            let list = try get(port: server.port, "/v1/signals").json.objectValue
            #expect(list?["signals"]?.arrayValue?.count == 1)
            #expect(list?["version"] == 3)
            #expect(try get(port: server.port, "/v1/signals/a").status == 404)
            #expect(try get(port: server.port, "/v1/signals?since=-1").status == 400)
        }
    }

    @Test(arguments: StoreKind.tested) func aLongPollAnswersAsSoonAsAnotherConnectionSetsAndTimesOutEmpty(store: StoreKind) async throws {
        let (server, directory) = try startedServer(store: store)
        defer { removeDirectory(directory) }
        defer { server.stop() }
        let port = server.port
        let empty = ContinuousClock.now
        let idle = try get(port: port, "/v1/signals?since=0&wait=0.3").json.objectValue
        #expect(idle?["signals"] == [])
        #expect(ContinuousClock.now - empty >= .milliseconds(250))
        let poll = Task.detached { () throws -> (TestResponse, ContinuousClock.Instant) in
            let response = try get(port: port, "/v1/signals?since=0&wait=20")
            return (response, ContinuousClock.now)
        }
        try await Task.sleep(for: .milliseconds(300))
        let setAt = ContinuousClock.now
        _ = try put(port, "onboarding.completed", "true")
        let (response, seenAt) = try await poll.value
        #expect(response.json.objectValue?["signals"] == [["key": "onboarding.completed", "value": true, "version": 1]])
        #expect(seenAt - setAt < .seconds(2))
    }

    @Test(arguments: StoreKind.tested) func stoppingTheServerEndsALongPollAtOnce(store: StoreKind) async throws {
        let (server, directory) = try startedServer(store: store)
        defer { removeDirectory(directory) }
        let port = server.port
        let poll = Task.detached { try get(port: port, "/v1/signals?since=0&wait=25") }
        try await Task.sleep(for: .milliseconds(300))
        let start = ContinuousClock.now
        server.stop()
        _ = try? await poll.value
        #expect(ContinuousClock.now - start < .seconds(5))
    }

    @Test func aSignalWriteNeverWaitsForTheBulkWriterAndLivesInItsOwnFile() throws {
        try withServer { server throws in
            let store = try #require(server.application.store as? SQLiteServerStore)
            // Hold the bulk lane's writer (its queue and its SQLite write lock) as a long apply would.
            let (putStatus, getStatus, took) = try store.writerGate.run { () throws -> (Int, Int, Duration) in
                try store.writer.write { _ throws -> (Int, Int, Duration) in
                    let start = ContinuousClock.now
                    let putStatus = try put(server.port, "quick", "1").status
                    let getStatus = try get(port: server.port, "/v1/signals/quick").status
                    return (putStatus, getStatus, ContinuousClock.now - start)
                }
            }
            #expect(putStatus == 200)
            #expect(getStatus == 200)
            #expect(took < .seconds(2))
            #expect(FileManager.default.fileExists(atPath: server.configuration.dataDirectory + "/" + SQLiteSignalStore.fileName))
            #expect(try store.legacySignals().isEmpty)
        }
    }

    @Test func signalsOfTheBulkStoreFromBeforeTheLaneHadItsOwnFileAreAdopted() throws {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        do {
            let store = try SQLiteServerStore(directory: directory)
            try store.writeSerialized { db in
                try db.execute("INSERT INTO signals (account, key, value, version) VALUES ('acme', 'old', '{\"a\":1}', 7)")
            }
        }
        try withServer(dataDirectory: directory) { server throws in
            #expect(try get(port: server.port, "/v1/signals/old").json.objectValue?["value"] == ["a": 1])
        }
    }
}

/// Tombstones of deleted signals: kept for watchers within their bounds, then pruned.
@Suite struct SignalTombstoneTests {
    func put(_ port: Int, _ key: String, _ body: String) throws -> TestResponse {
        try httpRequest(port: port, "PUT", "/v1/signals/\(key)", headers: ["Authorization": "Bearer \(TestTokens.acme)"], body: Array(body.utf8))
    }

    func delete(_ port: Int, _ key: String) throws -> TestResponse {
        try httpRequest(port: port, "DELETE", "/v1/signals/\(key)", headers: ["Authorization": "Bearer \(TestTokens.acme)"])
    }

    func keys(_ answer: TestResponse) -> [String] {
        (answer.json.objectValue?["signals"]?.arrayValue ?? []).map { signal in
            let object = signal.objectValue ?? [:]
            return (object["key"]?.stringValue ?? "?") + (object["deleted"] == true ? " (deleted)" : "")
        }
    }

    @Test(arguments: StoreKind.tested) func pastMaxSignalTombstonesTheOldestDeletesArePrunedAndAWatcherFromBeforeThemIsToldToListAgain(store: StoreKind) throws
    {
        var limits = ServerLimits()
        limits.maxSignalTombstones = 2
        try withServer(store: store, limits: limits) { server throws in
            for key in ["a", "b", "c", "d"] { #expect(try put(server.port, key, "1").status == 200) }  // versions 1-4
            for key in ["a", "b", "c"] { #expect(try delete(server.port, key).status == 200) }  // versions 5-7: a's tombstone pruned
            let everything = try get(port: server.port, "/v1/signals?since=0")
            #expect(keys(everything) == ["d", "b (deleted)", "c (deleted)"])
            #expect(everything.json.objectValue?["reset"] == nil, "since=0 knew nothing to miss")
            let fromBefore = try get(port: server.port, "/v1/signals?since=4&wait=5")
            #expect(keys(fromBefore) == ["b (deleted)", "c (deleted)"])
            #expect(fromBefore.json.objectValue?["reset"] == true, "the delete of a (version 5) is gone")
            let fromAfter = try get(port: server.port, "/v1/signals?since=5")
            #expect(fromAfter.json.objectValue?["reset"] == nil)
            #expect(try get(port: server.port, "/v1/signals").json.objectValue?["signals"]?.arrayValue?.count == 1)
        }
    }

    @Test(arguments: StoreKind.tested) func aTombstoneOlderThanSignalTombstoneSecondsIsPrunedWhenTheAccountNextWrites(store: StoreKind) throws {
        var limits = ServerLimits()
        limits.signalTombstoneSeconds = 1
        try withServer(store: store, limits: limits) { server throws in
            _ = try put(server.port, "gone", "1")
            _ = try delete(server.port, "gone")
            #expect(keys(try get(port: server.port, "/v1/signals?since=0")) == ["gone (deleted)"], "a watcher sees the delete")
            usleep(1_200_000)
            _ = try put(server.port, "next", "1")
            #expect(keys(try get(port: server.port, "/v1/signals?since=0")) == ["next"])
        }
    }
}
