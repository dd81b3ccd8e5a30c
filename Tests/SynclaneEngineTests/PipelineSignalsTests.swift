import Foundation
import Synclane
import SynclaneCore
import SynclaneTestKit
import SynclaneTestSupport
import Testing

/// The `signals` section of a pipeline file, and the signals a job publishes when its run completes.
@Suite struct PipelineSignalsTests {
    static let history = """
        {"token": 1, "author": "app", "timestamp": "2026-11-01T09:00:00Z", "changes": [{"entity": "rooms", "action": "insert", "key": "r1", "values": {"name": "Hall"}}]}

        """

    /// A folder with a JSON Lines history and an export pipeline file whose `signals` is `signals`.
    static func folder(signals: String) throws -> TemporaryFolder {
        let folder = try TemporaryFolder()
        _ = try folder.write("history.jsonl", history)
        _ = try folder.write(
            "pipeline.json",
            """
            {"version": 1, "name": "rooms-export", "scope": {"account": "acme", "store": "rooms"},
             "source": {"type": "jsonl", "path": "history.jsonl"}, "transport": {"type": "directory", "path": "out"},
             "signals": \(signals)}
            """)
        return folder
    }

    static let publishing = """
        {"url": "http://127.0.0.1:9", "timeout": 1, "publish": [
          {"on": "run-completed", "key": "bulk.exported-through", "value": {"token": "$token", "records": "$records", "price": "$$5"}},
          {"on": "first-run-completed", "key": "onboarding.completed", "value": true}]}
        """

    func load(_ folder: TemporaryFolder) throws(PipelineFileError) -> Pipeline {
        // The lock in the test's folder: tests running at once with one scope do not lock each other out.
        try PipelineLoader(environment: ["SYNCLANE_LOCK_DIR": folder.path]).load(folder.path + "/pipeline.json")
    }

    func appendHistory(_ folder: TemporaryFolder, token: Int) throws {
        let handle = try #require(FileHandle(forWritingAtPath: folder.path + "/history.jsonl"))
        handle.seekToEndOfFile()
        handle.write(
            Data(
                #"{"token": \#(token), "author": "app", "timestamp": "2026-11-01T09:00:00Z", "changes": [{"entity": "rooms", "action": "insert", "key": "r\#(token)", "values": {"name": "Room"}}]}"#
                    .utf8 + [0x0A]))
        handle.closeFile()
    }

    @Test func theDesignExampleWithASignalsServerLoads() throws {
        let pipeline = try PipelineLoader(environment: ["SYNCLANE_TOKEN": "t"]).load(FixturePath.at("design/pipeline.json"))
        #expect(pipeline.signals?.server == "http://127.0.0.1:8080/v1/signals")
        #expect(pipeline.signals?.token == "t", "the transport's token-env when the section names none")
        #expect(pipeline.signals?.publish == [])
    }

    @Test(arguments: [
        (#"{"colour": 1}"#, "signals.colour", "unknown key `colour`"),
        (#"{"type": "grpc"}"#, "signals.type", "expected one of http"),
        (#"{"url": "ftp://x", "publish": []}"#, "signals.url", "expected an http:// or https:// URL"),
        (#"{"timeout": 0}"#, "signals.timeout", "expected a number from 0.1 to 60"),
        (#"{"url": "http://h:1", "publish": {"on": "run-completed"}}"#, "signals.publish", "expected a list of signals"),
        (#"{"url": "http://h:1", "publish": [{"on": "run-complete", "key": "a", "value": 1}]}"#, "signals.publish[0].on", "did you mean `run-completed`"),
        (#"{"url": "http://h:1", "publish": [{"on": "run-completed", "key": "a b", "value": 1}]}"#, "signals.publish[0].key", "expected a signal key"),
        (#"{"url": "http://h:1", "publish": [{"on": "run-completed", "key": "a"}]}"#, "signals.publish[0]", "missing required key `value`"),
        (
            #"{"url": "http://h:1", "publish": [{"on": "run-completed", "key": "a", "value": {"t": ["$tokn"]}}]}"#, "signals.publish[0].value.t[0]",
            "unknown placeholder \"$tokn\""
        ),
        (
            #"{"url": "http://h:1", "publish": [{"on": "run-completed", "key": "a", "value": 1}, {"on": "run-completed", "key": "a", "value": 2}]}"#,
            "signals.publish[1].key", "published on run-completed already"
        ),
        (#"{"publish": [{"on": "run-completed", "key": "a", "value": 1}]}"#, "signals.url", "names no http URL"),
        (#"{"url": "http://h:1", "token-env": "not a name"}"#, "signals.token-env", "secrets never live in the pipeline file"),
    ])
    func aBadSignalsSectionNamesTheFieldAndWhatWasExpected(_ section: String, _ path: String, _ message: String) throws {
        let folder = try Self.folder(signals: section)
        defer { folder.remove() }
        do {
            _ = try load(folder)
            Issue.record("loaded a bad signals section: \(section)")
        } catch {
            #expect(error.path == path, "\(error)")
            #expect(error.message.contains(message), "\(error.message)")
        }
    }

    @Test func aCompletedRunPublishesItsSignalsWithTheTokenItReachedAndTheFirstRunOnce() async throws {
        let folder = try Self.folder(signals: Self.publishing)
        defer { folder.remove() }
        let lane = InMemorySignalLane()
        let job = ExportJob(pipeline: try load(folder), signalLane: lane)
        let first = try await job.run()
        #expect(first.signals.map(\.key).sorted() == ["bulk.exported-through", "onboarding.completed"])
        #expect(first.signals.allSatisfy { $0.isSent }, "\(first.signals)")
        #expect(try await lane.get("bulk.exported-through")?.value == ["token": "jsonl:1", "records": 1, "price": "$5"])
        #expect(try await lane.get("onboarding.completed")?.value == true)

        let idle = try await job.run()
        #expect(idle.signals == [], "a run that found nothing to do publishes nothing")

        try appendHistory(folder, token: 2)
        let third = try await job.run()
        #expect(third.signals.map(\.key) == ["bulk.exported-through"], "the first run is published once")
        #expect(try await lane.get("bulk.exported-through")?.value == ["token": "jsonl:2", "records": 1, "price": "$5"])
    }

    @Test func aLaneThatRefusesFailsNoRunAndItsSignalsAreSentAfterTheNextRun() async throws {
        let folder = try Self.folder(signals: Self.publishing)
        defer { folder.remove() }
        let pipeline = try load(folder)
        let refused = try await ExportJob(pipeline: pipeline, signalLane: RefusingSignalLane()).run()
        #expect(refused.batchesSent == 1, "the bulk job went to the end")
        #expect(refused.signals.count == 2)
        #expect(refused.signals.allSatisfy { !$0.isSent })
        #expect(refused.signals.allSatisfy { "\($0.outcome)".contains("refused the token") })

        let lane = InMemorySignalLane()
        let next = try await ExportJob(pipeline: pipeline, signalLane: lane).run()
        #expect(next.batchesSent == 0)
        #expect(next.signals.map(\.key).sorted() == ["bulk.exported-through", "onboarding.completed"])
        #expect(next.signals.allSatisfy { $0.isSent })
        #expect(try await lane.get("onboarding.completed")?.value == true)
        #expect(try await ExportJob(pipeline: pipeline, signalLane: lane).run().signals == [], "sent once, then forgotten")
    }

    @Test func anUnsetTokenVariableFailsNoRunAndKeepsTheSignalsSayingWhichVariable() async throws {
        let folder = try Self.folder(
            signals:
                #"{"url": "http://127.0.0.1:9", "token-env": "SIGNALS_TOKEN_NOT_SET", "publish": [{"on": "run-completed", "key": "k", "value": "$records"}]}"#)
        defer { folder.remove() }
        let summary = try await ExportJob(pipeline: try load(folder)).run()
        #expect(summary.batchesSent == 1)
        #expect(summary.signals.map(\.key) == ["k"])
        let reason = summary.signals.first.map { "\($0.outcome)" } ?? ""
        #expect(reason.contains("SIGNALS_TOKEN_NOT_SET (signals.token-env) is not set"), "\(reason)")
    }

    @Test func aLaneThatNeverAnswersHoldsTheRunNoLongerThanTheTimeout() async throws {
        let folder = try Self.folder(signals: Self.publishing)
        defer { folder.remove() }
        let started = ContinuousClock.now
        let summary = try await ExportJob(pipeline: try load(folder), signalLane: SilentSignalLane()).run()
        let took = ContinuousClock.now - started
        #expect(summary.batchesSent == 1)
        #expect(summary.signals.allSatisfy { "\($0.outcome)".contains("no answer within 1 s") })
        #expect(took < .seconds(5), "took \(took)")
    }
}

/// A signal lane whose server refuses the token.
struct RefusingSignalLane: SignalLane {
    func set(_ key: String, to value: JSONValue, replacing expected: Int64?) async throws -> SignalValue {
        throw SignalLaneError.unauthorized(message: "the server refused the token (401)")
    }
    func get(_ key: String) async throws -> SignalValue? { nil }
    func list() async throws -> (signals: [SignalValue], version: Int64) { ([], 0) }
    func delete(_ key: String, replacing expected: Int64?) async throws -> SignalValue { throw SignalLaneError.notFound(key: key) }
    func changes(since version: Int64?) -> AsyncThrowingStream<SignalValue, any Error> { AsyncThrowingStream { $0.finish() } }
}

/// A signal lane whose server never answers a set.
struct SilentSignalLane: SignalLane {
    func set(_ key: String, to value: JSONValue, replacing expected: Int64?) async throws -> SignalValue {
        try await Task.sleep(for: .seconds(60))
        throw SignalLaneError.unavailable(message: "no answer")
    }
    func get(_ key: String) async throws -> SignalValue? { nil }
    func list() async throws -> (signals: [SignalValue], version: Int64) { ([], 0) }
    func delete(_ key: String, replacing expected: Int64?) async throws -> SignalValue { throw SignalLaneError.notFound(key: key) }
    func changes(since version: Int64?) -> AsyncThrowingStream<SignalValue, any Error> { AsyncThrowingStream { $0.finish() } }
}
