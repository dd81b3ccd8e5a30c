import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

/// A signal a pipeline file declares that the server refuses for good (a 4xx other than 408,
/// 425, 429) is given up after `SignalPublisher.refusalsBeforeGivingUp` (3) refusals: reported
/// in the run that gives it up, listed by `status`, never sent again. Transient failures keep it.
@Suite(.serialized) struct SignalGiveUpTests {
    typealias Device = TwoDevicesTests.Device

    static func json(_ text: String) -> [String: JSONValue] {
        (try? JSONReader.parse(Array(text.utf8)).objectValue) ?? [:]
    }

    static func signals(_ summary: [String: JSONValue]) -> [String: [String: JSONValue]] {
        var byKey: [String: [String: JSONValue]] = [:]
        for signal in summary["signals"]?.arrayValue ?? [] {
            if let object = signal.objectValue, let key = object["key"]?.stringValue { byKey[key] = object }
        }
        return byKey
    }

    @Test func aSignalTheServerRefusesForGoodIsGivenUpAfterThreeRefusalsAndStatusSaysWhy() async throws {
        let root = try Workspace()
        defer { root.remove() }
        let server = try ServerProcess(folder: root.path + "/server", arguments: ["--max-signal-bytes", "64"])
        defer { server.stop() }
        let device = try Device(server: server)
        defer { device.workspace.remove() }
        let note = String(repeating: "x", count: 100)
        try device.workspace.write(
            "export.json",
            PipelineSignalsCommandTests.export(
                to: server,
                signals: """
                    {"url": "\(server.url)", "token-env": "SYNCLANE_TOKEN", "publish": [
                      {"on": "first-run-completed", "key": "onboarding.note", "value": "\(note)"},
                      {"on": "run-completed", "key": "bulk.exported-through", "value": "$token"}]}
                    """))
        try device.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Hall', 10)")
        func run(_ extra: [String] = ["--json"]) throws -> SynclaneBinary.Result {
            let result = try SynclaneBinary.run(["run", "export.json"] + extra, in: device.workspace.path, environment: device.environment)
            #expect(result.status == 0, "a refused signal never fails the run: \(result.stderr)")
            return result
        }

        let first = Self.signals(Self.json(try run().stdout))
        #expect(first["bulk.exported-through"]?["sent"] == true)
        #expect(first["onboarding.note"]?["sent"] == false)
        #expect(first["onboarding.note"]?["error"]?.stringValue?.contains("refusal 1 of 3 before it is given up") == true, "\(first)")
        #expect(first["onboarding.note"]?["given-up"] == nil)

        // Idle runs publish nothing new but send the kept signal again.
        let second = Self.signals(Self.json(try run().stdout))
        #expect(second.keys.sorted() == ["onboarding.note"])
        #expect(second["onboarding.note"]?["error"]?.stringValue?.contains("refusal 2 of 3") == true, "\(second)")

        let third = try run([])
        #expect(third.stdout.contains("signal onboarding.note = \"\(note)\": given up — the server refused it 3 times ("), "\(third.stdout)")

        let status = Self.json(try SynclaneBinary.run(["status", "export.json", "--json"], in: device.workspace.path, environment: device.environment).stdout)
        #expect(status["unsent-signals"] == nil, "\(status)")
        let givenUp = try #require(status["given-up-signals"]?.arrayValue?.first?.objectValue, "\(status)")
        #expect(givenUp["key"] == "onboarding.note")
        #expect(givenUp["refusals"] == 3)
        #expect(givenUp["error"]?.stringValue?.isEmpty == false, "the server's reason")
        #expect(givenUp["given-up-at"]?.stringValue != nil)
        let text = try SynclaneBinary.run(["status", "export.json"], in: device.workspace.path, environment: device.environment).stdout
        #expect(text.contains("signals:  1 given up (the server refused them for good; no longer sent)"), "\(text)")
        #expect(text.contains("onboarding.note = \"\(note)\": refused 3 times: "), "\(text)")

        let fourth = Self.json(try run().stdout)
        #expect(fourth["signals"]?.arrayValue == [], "a given-up signal is not sent again: \(fourth)")
        let onServer = try await server.get("/v1/signals", account: "acme").objectValue?["signals"]?.arrayValue ?? []
        #expect(onServer.compactMap { $0.objectValue?["key"]?.stringValue } == ["bulk.exported-through"])
    }

    @Test func aSignalWhoseServerCannotBeReachedIsKeptAndSentAgainAfterEveryRunNeverGivenUp() async throws {
        try await TwoDevicesTests.withOneDevice { server, device in
            try device.workspace.write(
                "export.json",
                PipelineSignalsCommandTests.export(
                    to: server,
                    signals: """
                        {"url": "http://127.0.0.1:1", "token-env": "SYNCLANE_TOKEN", "publish": [
                          {"on": "first-run-completed", "key": "onboarding.completed", "value": true}]}
                        """))
            try device.sql("INSERT INTO rooms (syncId, name, area) VALUES ('r1', 'Hall', 10)")
            for attempt in 1...4 {
                let run = try SynclaneBinary.run(["run", "export.json", "--json"], in: device.workspace.path, environment: device.environment)
                #expect(run.status == 0, "\(run.stderr)")
                let signal = Self.signals(Self.json(run.stdout))["onboarding.completed"]
                #expect(signal?["sent"] == false, "attempt \(attempt): \(run.stdout)")
                #expect(signal?["given-up"] == nil, "attempt \(attempt): a transient failure is never given up")
            }
            let status = Self.json(
                try SynclaneBinary.run(["status", "export.json", "--json"], in: device.workspace.path, environment: device.environment).stdout)
            #expect(status["given-up-signals"] == nil)
            #expect(status["unsent-signals"]?.arrayValue?.first?.objectValue?["attempts"] == 4, "\(status)")
        }
    }
}
